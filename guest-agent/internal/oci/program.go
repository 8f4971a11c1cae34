package oci

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/hermes-box/hermes-box/guest-agent/internal/supervise"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// GuestPort is the port Executor listens on inside the box.
const GuestPort = boxlayout.ExecutorPort

// DefaultDataDir is Executor's data directory inside the box.
const DefaultDataDir = boxlayout.ExecutorDataDir

// RuntimeUser runs Executor.
const RuntimeUser = boxlayout.ServiceUser

// Program returns the supervisor program (name, command, user, directory,
// environment) for the active release under runtimeRoot, for the layout the
// release holds (the same environment for both). It resolves `current` now,
// so a later activation takes effect at the next (re)start and never swaps
// files under a running process. hostPort is the port published on the
// host's loopback, which the web UI's origin must name.
func Program(runtimeRoot, dataDir string, hostPort int) (supervise.Program, error) {
	if hostPort < 1 || hostPort > 65535 {
		return supervise.Program{}, fmt.Errorf("executor program: host port %d is not in 1-65535", hostPort)
	}
	s := &Store{Root: runtimeRoot}
	r, err := s.Current()
	if err != nil {
		return supervise.Program{}, fmt.Errorf("executor program: %w", err)
	}
	if r == nil {
		return supervise.Program{}, fmt.Errorf("executor program: no active release under %s (run `hermes-box-agent executor pull --activate`)", runtimeRoot)
	}
	layout, err := checkPayload(r.Dir)
	if err != nil {
		return supervise.Program{}, fmt.Errorf("executor program: %w", err)
	}
	return supervise.Program{
		Name: "executor",
		// bun is the release's own, by absolute path: never looked up on PATH.
		Command: []string{filepath.Join(r.Dir, bunPath), "run", layout.Entry()},
		Env: []string{
			"BUN_FEATURE_FLAG_DISABLE_IPV6=1",
			"EXECUTOR_HOST=0.0.0.0",
			"PORT=" + strconv.Itoa(GuestPort),
			"EXECUTOR_ALLOW_LOCAL_NETWORK=false",
			// Newer releases read it (stdio MCP servers are processes
			// Executor starts); older ones hard-code it off.
			"EXECUTOR_ALLOW_STDIO_MCP=false",
			"EXECUTOR_DATA_DIR=" + dataDir,
			"EXECUTOR_WEB_BASE_URL=http://localhost:" + strconv.Itoa(hostPort),
		},
		User: RuntimeUser,
		Dir:  filepath.Join(r.Dir, selfhostDir),
	}, nil
}
