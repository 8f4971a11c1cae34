package executor

import (
	"fmt"
	"strconv"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/guest-agent/internal/supervise"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// Program returns the supervisor program (name, command, user, directory,
// environment) that runs the active release of the box's paths p: the
// release's oci.Entry, as the service user, with Executor's environment
// (the same for both layouts). hostPort is the port published on the
// host's loopback, which the web UI's origin must name.
func Program(p Paths, hostPort int) (supervise.Program, error) {
	if hostPort < 1 || hostPort > 65535 {
		return supervise.Program{}, fmt.Errorf("executor program: host port %d is not in 1-65535", hostPort)
	}
	e, err := oci.ActiveEntry(p.Runtime)
	if err != nil {
		return supervise.Program{}, err
	}
	return supervise.Program{
		Name:    boxlayout.ExecutorService,
		Command: e.Command,
		Env: []string{
			"BUN_FEATURE_FLAG_DISABLE_IPV6=1",
			"EXECUTOR_HOST=0.0.0.0",
			"PORT=" + strconv.Itoa(boxlayout.ExecutorPort),
			"EXECUTOR_ALLOW_LOCAL_NETWORK=false",
			// Newer releases read it (stdio MCP servers are processes
			// Executor starts); older ones hard-code it off.
			"EXECUTOR_ALLOW_STDIO_MCP=false",
			"EXECUTOR_DATA_DIR=" + p.Data,
			"EXECUTOR_WEB_BASE_URL=http://localhost:" + strconv.Itoa(hostPort),
			// Executor sends anonymous analytics unless one of these is
			// set (its self-host changelog, 0.0.36): nothing leaves the
			// box that the user did not ask for.
			"DO_NOT_TRACK=1",
			"EXECUTOR_DISABLE_ANALYTICS=1",
		},
		User: boxlayout.ServiceUser,
		Dir:  e.Dir,
	}, nil
}
