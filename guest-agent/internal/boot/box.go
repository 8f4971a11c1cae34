package boot

import (
	"fmt"
	"strconv"

	"github.com/hermes-box/hermes-box/guest-agent/internal/probe"
	"github.com/hermes-box/hermes-box/shared/health"
)

// Paths in the box (relative to the root when used with Options.Root).
const (
	Workspace   = "/workspace"
	HermesHome  = "/workspace/hermes-home"
	LogDir      = "/workspace/hermes-home/logs"
	WorkDir     = "/workspace/work"
	ExecutorDir = "/workspace/executor"
	// ExecutorRuntime holds the Executor releases and the `current` link.
	ExecutorRuntime = "/workspace/.hermes-box-runtime/executor"
	// ExecutorGuestPort is the Executor's fixed port inside the box.
	ExecutorGuestPort = 4788
	// ServiceUser runs Hermes and Executor.
	ServiceUser = "hermes"
)

// Environment variables boot reads (set on the machine by the host).
const (
	EnvRestoreMode      = "HERMES_BOX_RESTORE_MODE"
	EnvExecutorEnabled  = "HERMES_BOX_EXECUTOR_ENABLED"
	EnvExecutorHostPort = "HERMES_BOX_EXECUTOR_HOST_PORT"
)

// BoxOptions select the optional parts of the box's table.
type BoxOptions struct {
	ExecutorEnabled bool
	// ExecutorHostPort is the host's published port, for the web base URL.
	ExecutorHostPort int
}

func f(v float64) *float64 { return &v }
func n(v int) *int         { return &v }

// BoxTable is the box's program table (sshd, Executor when enabled, the
// Hermes gateway) and its checks, as the reference's supervisord.conf.
func BoxTable(o BoxOptions) Table {
	t := Table{Programs: []ProgramSpec{{
		Name: "sshd", Command: []string{"/usr/sbin/sshd", "-D", "-e"},
		Priority: 10, AutoStart: true, AutoRestart: "unexpected", StartSecs: f(1),
		// sshd keeps serving while a snapshot streams the root and the
		// workspace over it, so its log lives under /run, which neither
		// part archives: a log line written mid-stream cannot fail it.
		Log: &LogSpec{Path: "/run/hermes-box/sshd.log", MaxBytes: 10 << 20, Backups: 3},
	}, {
		Name: "hermes", Command: []string{"/usr/local/bin/hermes", "gateway", "run", "--replace"},
		User: ServiceUser, Directory: WorkDir,
		Environment: map[string]string{"HOME": "/home/hermes", "HERMES_HOME": HermesHome, "PATH": "/usr/local/bin:/usr/bin:/bin"},
		Priority:    40, AutoStart: true, AutoRestart: "unexpected", StartSecs: f(3), StartRetries: n(20),
		StopSignal: "TERM", StopWaitSecs: f(30),
		Log: &LogSpec{Path: LogDir + "/hermes-gateway.log", MaxBytes: 25 << 20, Backups: 5},
	}}}
	t.Checks = []probe.CheckSpec{
		{Code: health.CheckSSHD, TCP: "127.0.0.1:22"},
		{Code: health.CheckHermesGateway, Service: "hermes"},
	}
	if !o.ExecutorEnabled {
		return t
	}
	hostPort := o.ExecutorHostPort
	if hostPort == 0 {
		hostPort = ExecutorGuestPort
	}
	release := ExecutorRuntime + "/current"
	t.Programs = append(t.Programs, ProgramSpec{
		Name: "executor", Command: []string{release + "/usr/local/bin/bun", "run", "src/serve.ts"},
		User: ServiceUser, Directory: release + "/app/apps/host-selfhost",
		Environment: map[string]string{
			"HOME": "/home/hermes", "BUN_FEATURE_FLAG_DISABLE_IPV6": "1", "EXECUTOR_HOST": "0.0.0.0",
			"PORT": strconv.Itoa(ExecutorGuestPort), "EXECUTOR_ALLOW_LOCAL_NETWORK": "false",
			"EXECUTOR_DATA_DIR": ExecutorDir + "/data", "EXECUTOR_WEB_BASE_URL": "http://localhost:" + strconv.Itoa(hostPort),
		},
		Priority: 30, AutoStart: true, AutoRestart: "unexpected", StartSecs: f(5), StartRetries: n(20),
		StopSignal: "TERM", StopWaitSecs: f(45),
		Log: &LogSpec{Path: ExecutorDir + "/executor.log", MaxBytes: 25 << 20, Backups: 5},
	})
	t.Checks = append(t.Checks, probe.CheckSpec{Code: health.CheckExecutor, HTTP: "http://127.0.0.1:" + strconv.Itoa(ExecutorGuestPort) + "/api/health"})
	return t
}

// BoxOptionsFromEnv reads the Executor settings the host passes to the
// machine.
func BoxOptionsFromEnv(getenv func(string) string) (BoxOptions, error) {
	var o BoxOptions
	if v := getenv(EnvExecutorEnabled); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("%s: want true or false, got %q", EnvExecutorEnabled, v)
		}
		o.ExecutorEnabled = b
	}
	if v := getenv(EnvExecutorHostPort); v != "" && o.ExecutorEnabled {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return o, fmt.Errorf("%s: want a port 1-65535, got %q", EnvExecutorHostPort, v)
		}
		o.ExecutorHostPort = p
	}
	return o, nil
}
