package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

// Machine states of 1.0.4 (src/config.rs), and the 1.25 profile's
// paused and pausing (`machine pause`, `machine resume`).
const (
	stateCreated     = "created"
	stateRunning     = "running"
	stateStopped     = "stopped"
	stateFailed      = "failed"
	stateUnreachable = "unreachable"
	statePaused      = "paused"
	statePausing     = "pausing"
)

// record is a machine as the fake keeps it. The JSON keys that `ls --json`
// and `status --json` print come from statusJSON.
type record struct {
	Name      string   `json:"name"`
	State     string   `json:"state"`
	CPUs      int      `json:"cpus"`
	MemoryMiB int      `json:"memory_mib"`
	StorageGB int      `json:"storage_gb,omitempty"`
	OverlayGB int      `json:"overlay_gb,omitempty"`
	Image     string   `json:"image,omitempty"`
	From      string   `json:"from,omitempty"`
	Ports     []string `json:"ports,omitempty"`
	Env       []string `json:"env,omitempty"`
	SecretEnv []string `json:"secret_env,omitempty"`
	Net       bool     `json:"net"`
	// Egress is the kept egress policy: "allow-host=H", "allow-cidr=C",
	// "outbound-localhost-only" (1.9.3; 1.0.4 drops it on create --from).
	Egress []string `json:"egress,omitempty"`
	// EgressFloor is SMOLVM_EGRESS_FLOOR as the last start saw it.
	EgressFloor string `json:"egress_floor,omitempty"`
	NetBackend  string `json:"net_backend,omitempty"`
	CreatedAt   string `json:"created_at"`
	PID         int    `json:"pid,omitempty"` // the VMM (_forward), while running
	// Entrypoint and Cmd come from the packed Smolfile (create --from).
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	// EntryPID is the running entrypoint; Guest maps a guest port to the
	// loopback address standing in for it while the machine runs.
	EntryPID int               `json:"entry_pid,omitempty"`
	Guest    map[string]string `json:"guest,omitempty"`
}

// statusJSON is one machine in the shape of 1.0.4's `ls --json` and
// `status --json` (vm_common.rs).
func (r *record) statusJSON() map[string]any {
	var pid any
	if r.PID > 0 {
		pid = r.PID
	}
	image := any(nil)
	if r.Image != "" {
		image = r.Image
	}
	m := map[string]any{
		"name": r.Name, "state": r.State, "cpus": r.CPUs, "memory_mib": r.MemoryMiB, "pid": pid,
		"mounts": 0, "ports": len(r.Ports), "created_at": r.CreatedAt, "storage_gb": r.StorageGB,
		"overlay_gb": r.OverlayGB, "image": image, "entrypoint": orEmpty(r.Entrypoint), "cmd": orEmpty(r.Cmd),
		"ephemeral": false, "gpu": false, "gpu_vram_mib": nil, "restart_policy": "never",
		"restart_max_retries": 0, "restart_count": 0, "health_cmd": nil, "health_interval_secs": nil,
		"health_timeout_secs": nil, "health_retries": nil, "health_startup_grace_secs": nil, "network": r.Net,
	}
	if newer125() {
		// 1.25 only adds keys (reference/upstream-today.md).
		m["published_ports"], m["labels"], m["detached"] = orEmpty(r.Ports), map[string]string{}, false
		m["block_io"], m["disks"], m["forkable"], m["cuda"] = nil, []any{}, false, false
	}
	return m
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// release is the smolvm release the fake stands in for.
func release() string {
	if v := os.Getenv("FAKESMOLVM_VERSION"); v != "" {
		return v
	}
	return smolvmcli.V104
}

// grammar is the release whose grammar the fake parses with: 1.0.4's for
// 1.0.4, the 1.25 profile's for 1.25.x, 1.9.3's for any other.
func grammar() string {
	switch r := release(); {
	case r == smolvmcli.V104:
		return smolvmcli.V104
	case newer125():
		return smolvmcli.V125
	}
	return smolvmcli.V193
}

// newer125 says whether the fake stands in for a 1.25 release.
func newer125() bool { return strings.HasPrefix(release(), "1.25.") }

// sharedStore says whether create --from uses the shared extraction store.
func sharedStore() bool {
	return release() != smolvmcli.V104 && runtime.GOOS == "linux" && os.Getenv("SMOLVM_DISABLE_SHARED_EXTRACT") == ""
}

func (f *fake) dir(name string) string  { return filepath.Join(f.state, "machines", name) }
func (f *fake) root(name string) string { return filepath.Join(f.dir(name), "root") }
func (f *fake) data(name string) string { return filepath.Join(f.dir(name), "data") }

var errNotFound = errors.New("not found")

// load reads a machine; its error wraps errNotFound when there is none.
func (f *fake) load(name string) (*record, error) {
	b, err := os.ReadFile(filepath.Join(f.dir(name), "machine.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("machine '%s' %w", name, errNotFound)
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("reading machine '%s': %w", name, err)
	}
	// A test may force a state (failed, unreachable) with a file.
	if forced, err := os.ReadFile(filepath.Join(f.dir(name), "force-state")); err == nil {
		r.State = string(forced)
	}
	// The VM ends with its entrypoint.
	if r.State == stateRunning && r.EntryPID > 0 && !alive(r.EntryPID) {
		r.State = stateStopped
	}
	return &r, nil
}

func (f *fake) save(r *record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(f.dir(r.Name), "machine.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(f.dir(r.Name), "machine.json"))
}

// lockDB takes the state lock without waiting, as 1.0.4's single-writer
// database refuses a second writer.
func (f *fake) lockDB() (func(), error) {
	lf, err := os.OpenFile(filepath.Join(f.state, "db.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lf.Close()
		return nil, errDBLocked{}
	}
	return func() { lf.Close() }, nil
}

// errDBLocked is 1.0.4's message when its database has another writer.
type errDBLocked struct{}

func (errDBLocked) Error() string { return "Database already open. Cannot acquire lock." }

// dispatch runs one parsed subcommand.
func (f *fake) dispatch(in *smolvmcli.Invocation) int {
	handlers := map[string]func(*smolvmcli.Invocation) error{
		"machine create":        f.create,
		"machine start":         f.start,
		"machine stop":          f.stop,
		"machine delete":        f.delete,
		"machine status":        f.status,
		"machine ls":            f.list,
		"machine update":        f.update,
		"machine data-dir":      f.dataDir,
		"machine egress-events": f.egressEvents,
		"machine cp":            f.copy,
		"pack create":           f.pack,
		"machine pause":         f.pause,
		"machine resume":        f.resume,
	}
	switch in.Command.Name() {
	case "machine exec":
		return f.exec(in)
	case "machine shell":
		return f.shell(in)
	}
	h, ok := handlers[in.Command.Name()]
	if !ok {
		return smolvmcli.Fail(os.Stderr, "the fake smolvm does not implement '%s'", in.Command.Name())
	}
	unlock, err := f.lockDB()
	if err != nil {
		return smolvmcli.Fail(os.Stderr, "%v", err)
	}
	defer unlock()
	if err := h(in); err != nil {
		return smolvmcli.Fail(os.Stderr, "%v", err)
	}
	return 0
}

func nameOr(in *smolvmcli.Invocation) string {
	if n := in.Value("name"); n != "" {
		return n
	}
	return "default"
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }
