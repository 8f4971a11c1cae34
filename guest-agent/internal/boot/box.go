package boot

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/probe"
	"github.com/hermes-box/hermes-box/guest-agent/internal/secrets"
	"github.com/hermes-box/hermes-box/guest-agent/internal/supervise"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// BoxOptions select the optional parts of the box's table.
type BoxOptions struct {
	ExecutorEnabled bool `json:"executorEnabled"`
	// ExecutorHostPort is the host's published port, for the web base URL.
	ExecutorHostPort int `json:"executorHostPort,omitempty"`
	// ExecutorImage is the pinned image reference; "" means the default pin.
	ExecutorImage string `json:"executorImage,omitempty"`
	// GatewayExternalSupervisor runs `hermes gateway run` with
	// --external-supervisor, for Hermes releases that have it: an in-chat
	// /restart or /update then exits back to this supervisor (status 75,
	// EX_TEMPFAIL, which autorestart "unexpected" restarts) instead of
	// starting a detached gateway outside it.
	GatewayExternalSupervisor bool `json:"gatewayExternalSupervisor,omitempty"`
}

// GatewayOptions sets o.GatewayExternalSupervisor from the pins row of the
// Hermes commit recorded under root; an unknown or missing record leaves it
// off (the flag is refused by releases that lack it).
func GatewayOptions(root string, o BoxOptions) BoxOptions {
	b, err := os.ReadFile(filepath.Join(root, boxlayout.HermesSourceMarker))
	if err != nil {
		return o
	}
	commit, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "commit=")
	if !ok {
		return o
	}
	if rel, err := pins.Hermes(commit); err == nil {
		o.GatewayExternalSupervisor = rel.ExternalSupervisor
	}
	return o
}

// WriteBoxOptions records o for this boot, the image resolved.
func WriteBoxOptions(root string, o BoxOptions) error {
	if o.ExecutorEnabled && o.ExecutorImage == "" {
		o.ExecutorImage = pins.DefaultExecutorImage
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	p := filepath.Join(root, boxlayout.BoxOptionsFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(p, append(b, '\n'), 0o644)
}

// ReadBoxOptions reads what the running boot recorded.
func ReadBoxOptions(root string) (BoxOptions, error) {
	var o BoxOptions
	b, err := os.ReadFile(filepath.Join(root, boxlayout.BoxOptionsFile))
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("%s: %w", boxlayout.BoxOptionsFile, err)
	}
	return o, nil
}

// GatewayEnv is the Hermes gateway's environment: its home, the service
// user's HOME, PATH, and git configured so a repository cannot run code
// (boxlayout.GatewayGitEnv). The gate's health probe starts Hermes with
// the same.
func GatewayEnv() []string {
	env := append([]string{"HERMES_HOME=" + boxlayout.HermesHome, "HOME=" + boxlayout.ServiceHome, "PATH=" + boxlayout.GatewayPath},
		boxlayout.GatewayGitEnv()...)
	slices.Sort(env) // the order the table's wire form reads back in
	return env
}

// BoxTable is the box's program table (sshd, Executor when enabled, the
// Hermes gateway) and its checks, as the reference's supervisord.conf.
func BoxTable(o BoxOptions) Table {
	gateway := []string{boxlayout.HermesCLI, "gateway", "run", "--replace"}
	if o.GatewayExternalSupervisor {
		gateway = append(gateway, "--external-supervisor")
	}
	t := Table{Programs: []supervise.Program{{
		Name: boxlayout.SSHDService, Command: []string{"/usr/sbin/sshd", "-D", "-e"},
		Priority: 10, AutoStart: true, AutoRestart: supervise.RestartUnexpected,
		StartTime: time.Second, StartRetries: supervise.DefaultStartRetries, StopWait: supervise.DefaultStopWait,
		// sshd keeps serving while a snapshot streams the root and the
		// workspace over it, so its log lives under /run, which neither
		// part archives: a log line written mid-stream cannot fail it.
		Log: supervise.Log{Path: boxlayout.SSHDLog, MaxBytes: 10 << 20, Backups: 3},
	}, {
		Name: boxlayout.HermesService, Command: gateway,
		User: boxlayout.ServiceUser, Dir: boxlayout.WorkDir, SecretsFile: secrets.RootFile,
		Env:      GatewayEnv(),
		Priority: 40, AutoStart: true, AutoRestart: supervise.RestartUnexpected,
		StartTime: 3 * time.Second, StartRetries: 20, StopSignal: syscall.SIGTERM, StopWait: 30 * time.Second,
		Log: supervise.Log{Path: boxlayout.LogDir + "/hermes-gateway.log", MaxBytes: 25 << 20, Backups: 5},
	}}}
	t.Checks = []probe.CheckSpec{
		{Code: health.CheckSSHD, TCP: "127.0.0.1:22"},
		{Code: health.CheckHermesGateway, Service: boxlayout.HermesService},
	}
	if !o.ExecutorEnabled {
		return t
	}
	hostPort := o.ExecutorHostPort
	if hostPort == 0 {
		hostPort = boxlayout.ExecutorPort
	}
	image := o.ExecutorImage
	if image == "" {
		image = pins.DefaultExecutorImage
	}
	// The launcher runs as root: the release store is root's, as for the
	// relay's `executor pull`; it drops to ServiceUser when it replaces
	// itself with bun (see `executor run`), so Executor runs as hermes.
	t.Programs = append(t.Programs, supervise.Program{
		Name: boxlayout.ExecutorService, Command: []string{boxlayout.AgentPath, "executor", "run"},
		Env: []string{
			boxlayout.EnvExecutorHostPort + "=" + strconv.Itoa(hostPort), boxlayout.EnvExecutorImage + "=" + image,
			"HOME=/root", "PATH=/usr/local/bin:/usr/bin:/bin",
		},
		Priority: 30, AutoStart: true, AutoRestart: supervise.RestartUnexpected,
		StartTime: 5 * time.Second, StartRetries: 20, StopSignal: syscall.SIGTERM, StopWait: 45 * time.Second,
		Log: supervise.Log{Path: boxlayout.ExecutorDir + "/executor.log", MaxBytes: 25 << 20, Backups: 5},
	})
	t.Checks = append(t.Checks, probe.CheckSpec{Code: health.CheckExecutor, HTTP: "http://127.0.0.1:" + strconv.Itoa(boxlayout.ExecutorPort) + "/api/health"})
	return t
}

// BoxOptionsFromEnv reads the Executor settings the host passes to the
// machine.
func BoxOptionsFromEnv(getenv func(string) string) (BoxOptions, error) {
	var o BoxOptions
	if v := getenv(boxlayout.EnvExecutorEnabled); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("%s: want true or false, got %q", boxlayout.EnvExecutorEnabled, v)
		}
		o.ExecutorEnabled = b
	}
	if v := getenv(boxlayout.EnvExecutorHostPort); v != "" && o.ExecutorEnabled {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return o, fmt.Errorf("%s: want a port 1-65535, got %q", boxlayout.EnvExecutorHostPort, v)
		}
		o.ExecutorHostPort = p
	}
	if o.ExecutorEnabled {
		o.ExecutorImage = getenv(boxlayout.EnvExecutorImage)
	}
	return o, nil
}
