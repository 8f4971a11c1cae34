package boot

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// Paths in the box (relative to the root when used with Options.Root).
const (
	Workspace   = boxlayout.Workspace
	HermesHome  = boxlayout.HermesHome
	LogDir      = boxlayout.LogDir
	WorkDir     = boxlayout.WorkDir
	ExecutorDir = boxlayout.ExecutorDir
	// ExecutorGuestPort is the Executor's fixed port inside the box.
	ExecutorGuestPort = boxlayout.ExecutorPort
	// GatewayProgram is the supervised Hermes gateway, which gets the
	// mapped secrets.
	GatewayProgram = boxlayout.HermesService
	// ServiceUser runs Hermes and Executor.
	ServiceUser = boxlayout.ServiceUser
	// ServiceUserID is its uid and gid.
	ServiceUserID = 1002
	// BoxAdmin is the relay's SSH login; BoxAdminID its uid and gid.
	BoxAdmin   = "boxadmin"
	BoxAdminID = 1001
	// HermesVenv is Hermes' virtualenv, which Hermes owns.
	HermesVenv = "/usr/local/lib/hermes-agent/venv"
	// AgentPath is this agent in the box; the Executor launcher is one of
	// its verbs.
	AgentPath = boxlayout.AgentPath
)

// Environment variables boot reads (set on the machine by the host).
const (
	EnvRestoreMode      = boxlayout.EnvRestoreMode
	EnvExecutorEnabled  = boxlayout.EnvExecutorEnabled
	EnvExecutorHostPort = boxlayout.EnvExecutorHostPort
	EnvExecutorImage    = boxlayout.EnvExecutorImage
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

// HermesSourceMarker records the commit of the installed Hermes tree; the
// approval-gate step writes it (guest-agent/internal/patch.SourceMarker).
const HermesSourceMarker = "/usr/local/lib/hermes-agent/.hermes-box-source"

// GatewayOptions sets o.GatewayExternalSupervisor from the pins row of the
// Hermes commit recorded under root; an unknown or missing record leaves it
// off (the flag is refused by releases that lack it).
func GatewayOptions(root string, o BoxOptions) BoxOptions {
	b, err := os.ReadFile(filepath.Join(root, HermesSourceMarker))
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

// BoxOptionsFile is where a running boot records its options (relative to
// the root, on /run), so verbs started outside the machine's environment
// (the relay's health) know what this boot runs.
const BoxOptionsFile = "run/hermes-box/box-options.json"

// WriteBoxOptions records o for this boot, the image resolved.
func WriteBoxOptions(root string, o BoxOptions) error {
	if o.ExecutorEnabled && o.ExecutorImage == "" {
		o.ExecutorImage = pins.DefaultExecutorImage
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	p := filepath.Join(root, BoxOptionsFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(p, append(b, '\n'), 0o644)
}

// ReadBoxOptions reads what the running boot recorded.
func ReadBoxOptions(root string) (BoxOptions, error) {
	var o BoxOptions
	b, err := os.ReadFile(filepath.Join(root, BoxOptionsFile))
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("/%s: %w", BoxOptionsFile, err)
	}
	return o, nil
}

// BoxTable is the box's program table (sshd, Executor when enabled, the
// Hermes gateway) and its checks, as the reference's supervisord.conf.
func BoxTable(o BoxOptions) Table {
	gateway := []string{"/usr/local/bin/hermes", "gateway", "run", "--replace"}
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
		Log: supervise.Log{Path: "/run/hermes-box/sshd.log", MaxBytes: 10 << 20, Backups: 3},
	}, {
		Name: GatewayProgram, Command: gateway,
		User: ServiceUser, Dir: WorkDir, SecretsFile: "/" + secrets.RootFile,
		Env:      []string{"HERMES_HOME=" + HermesHome, "HOME=/home/hermes", "PATH=/usr/local/bin:/usr/bin:/bin"},
		Priority: 40, AutoStart: true, AutoRestart: supervise.RestartUnexpected,
		StartTime: 3 * time.Second, StartRetries: 20, StopSignal: syscall.SIGTERM, StopWait: 30 * time.Second,
		Log: supervise.Log{Path: LogDir + "/hermes-gateway.log", MaxBytes: 25 << 20, Backups: 5},
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
		hostPort = ExecutorGuestPort
	}
	image := o.ExecutorImage
	if image == "" {
		image = pins.DefaultExecutorImage
	}
	// The launcher runs as root: the release store is root's, as for the
	// relay's `executor pull`; it drops to ServiceUser when it replaces
	// itself with bun (see `executor run`), so Executor runs as hermes.
	t.Programs = append(t.Programs, supervise.Program{
		Name: boxlayout.ExecutorService, Command: []string{AgentPath, "executor", "run"},
		Env: []string{
			EnvExecutorHostPort + "=" + strconv.Itoa(hostPort), EnvExecutorImage + "=" + image,
			"HOME=/root", "PATH=/usr/local/bin:/usr/bin:/bin",
		},
		Priority: 30, AutoStart: true, AutoRestart: supervise.RestartUnexpected,
		StartTime: 5 * time.Second, StartRetries: 20, StopSignal: syscall.SIGTERM, StopWait: 45 * time.Second,
		Log: supervise.Log{Path: ExecutorDir + "/executor.log", MaxBytes: 25 << 20, Backups: 5},
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
	if o.ExecutorEnabled {
		o.ExecutorImage = getenv(EnvExecutorImage)
	}
	return o, nil
}
