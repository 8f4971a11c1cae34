package smolvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/config"
)

// callMu serialises every smolvm call of this process: 1.0.4's state
// database admits a single writer. Across processes the host's operation
// lock does the same for mutating commands.
var callMu sync.Mutex

// The machine states of the supported smolvm releases.
const (
	StateCreated     = "created"
	StateRunning     = "running"
	StateStopped     = "stopped"
	StateFailed      = "failed"
	StateUnreachable = "unreachable"
	// StateFrozen is a fork base on releases with FrozenState.
	StateFrozen = "frozen"
	// StatePaused and StatePausing: `machine pause` froze (or is
	// freezing) the VM's vCPUs; `machine resume` thaws it (newer releases,
	// seen in the 1.25 line).
	StatePaused  = "paused"
	StatePausing = "pausing"
)

// PackCacheEnv names the variable that raises 1.0.4's extraction-cache cap.
const PackCacheEnv = "SMOLVM_PACK_CACHE_MAX_BYTES"

// Machine is one entry of `machine ls --json` or `machine status --json`.
// Raw keeps the whole object as smolvm printed it.
type Machine struct {
	Name      string          `json:"name"`
	State     string          `json:"state"`
	CPUs      int             `json:"cpus"`
	MemoryMiB int             `json:"memory_mib"`
	PID       *int            `json:"pid"`
	Network   bool            `json:"network"`
	Raw       json.RawMessage `json:"-"`
}

// Driver runs smolvm through a Runner. What it may do with the smolvm on
// PATH comes from that release's row of the pins table (Release).
type Driver struct {
	runner Runner
	rel    release
	host   host
	// unconfined turns the VMM's confinement off (ConfineVMM).
	unconfined bool
	// bins remembers the checked smolvm executables (RememberIn).
	bins *Binaries
}

// New returns a Driver that runs smolvm with r.
func New(r Runner) *Driver {
	return &Driver{runner: r, host: host{goos: runtime.GOOS, goarch: runtime.GOARCH, seccompMode: procSeccompMode}}
}

// run runs one call under the process-wide lock and turns a non-zero exit
// into an *Error.
func (d *Driver) run(ctx context.Context, op, machine string, c Cmd) (Result, error) {
	res, err := d.call(ctx, c)
	if err != nil {
		return res, fmt.Errorf("smolvm %s: %w", op, err)
	}
	if res.ExitCode != 0 {
		return res, newError(op, machine, res)
	}
	return res, nil
}

// call runs one call under the process-wide lock, after checking that it
// passes only declared flags (usedFlags).
func (d *Driver) call(ctx context.Context, c Cmd) (Result, error) {
	if err := declared(c.Args); err != nil && !isHelp(c.Args) {
		return Result{}, err
	}
	callMu.Lock()
	defer callMu.Unlock()
	return d.runner.Run(ctx, c)
}

// versionLine is what `smolvm --version` prints.
var versionLine = regexp.MustCompile(`^smolvm (\S+)$`)

// Version returns smolvm's version, e.g. "1.0.4".
func (d *Driver) Version(ctx context.Context) (string, error) {
	res, err := d.run(ctx, "--version", "", Cmd{Args: []string{"--version"}})
	if err != nil {
		return "", err
	}
	line := strings.TrimSpace(string(res.Stdout))
	m := versionLine.FindStringSubmatch(line)
	if m == nil {
		return "", fmt.Errorf("smolvm --version: unexpected output %q", line)
	}
	return m[1], nil
}

// List returns every machine (`machine ls --json`).
func (d *Driver) List(ctx context.Context) ([]Machine, error) {
	res, err := d.run(ctx, "machine ls", "", Cmd{Args: []string{"machine", "ls", "--json"}})
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(res.Stdout, &raws); err != nil || raws == nil {
		return nil, fmt.Errorf("smolvm machine ls: output is not a JSON array: %q", truncate(res.Stdout))
	}
	out := make([]Machine, 0, len(raws))
	for _, raw := range raws {
		m, err := decodeMachine(raw)
		if err != nil {
			return nil, fmt.Errorf("smolvm machine ls: %w", err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Exists reports whether a machine of that name exists.
func (d *Driver) Exists(ctx context.Context, name string) (bool, error) {
	ms, err := d.List(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// Status returns one machine (`machine status --name N --json`). A missing
// machine is an error wrapping ErrNotFound.
func (d *Driver) Status(ctx context.Context, name string) (Machine, error) {
	if err := checkName(name); err != nil {
		return Machine{}, err
	}
	res, err := d.run(ctx, "machine status", name, Cmd{Args: []string{"machine", "status", "--name", name, "--json"}})
	if err != nil {
		return Machine{}, err
	}
	m, err := decodeMachine(res.Stdout)
	if err != nil {
		return Machine{}, fmt.Errorf("smolvm machine status %s: %w", name, err)
	}
	return m, nil
}

func decodeMachine(raw []byte) (Machine, error) {
	var m Machine
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("decoding machine %q: %w", truncate(raw), err)
	}
	if m.Name == "" || m.State == "" {
		return m, fmt.Errorf("machine object without name or state: %q", truncate(raw))
	}
	m.Raw = append(json.RawMessage(nil), raw...)
	return m, nil
}

// Start starts a machine with the boot environment (bootEnv), then, on
// Linux, checks from the host's /proc that its VMM runs under a seccomp
// filter; a VMM without one is stopped and refused (ErrUnconfined).
func (d *Driver) Start(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	env, err := d.bootEnv(ctx)
	if err != nil {
		return err
	}
	if _, err = d.run(ctx, "machine start", name, Cmd{Args: []string{"machine", "start", "--name", name}, Env: env}); err != nil {
		return d.explainBootTimeout(ctx, name, err)
	}
	return d.checkConfined(ctx, name)
}

// explainBootTimeout names a start that missed smolvm's boot wait as such,
// with the machine's memory (from smolvm's status) as the likely cause
// and the next step; other errors pass unchanged.
func (d *Driver) explainBootTimeout(ctx context.Context, name string, err error) error {
	if !errors.Is(err, ErrBootTimeout) {
		return err
	}
	mem := "its memory setting"
	if m, serr := d.Status(ctx, name); serr == nil && m.MemoryMiB > 0 {
		mem = fmt.Sprintf("its memory, %d MiB,", m.MemoryMiB)
	}
	return userr.WithHint(fmt.Errorf("%w: %s did not boot within smolvm's fixed 30 s wait; %s is the likely cause (a large guest misses the wait on a busy or paging host): %w",
		ErrBootTimeout, name, mem, err),
		"free memory on this host and run the command again, or set a smaller "+MemorySetting+" in hermes-box.conf (the box and the builder both take it; 4096 boots in time where 8192 does not), then run the command again")
}

// MemorySetting is the hermes-box.conf key of the machines' memory.
const MemorySetting = "HERMES_BOX_MEMORY_MIB"

// Stop stops a machine.
func (d *Driver) Stop(ctx context.Context, name string) error {
	return d.simple(ctx, "machine stop", name, "machine", "stop", "--name", name)
}

// Delete deletes a machine; force stops it first if it runs.
func (d *Driver) Delete(ctx context.Context, name string, force bool) error {
	args := []string{"machine", "delete", "--name", name}
	if force {
		args = append(args, "--force")
	}
	return d.simple(ctx, "machine delete", name, args...)
}

// Shell attaches the terminal to the machine's root console and returns
// the shell's exit status.
func (d *Driver) Shell(ctx context.Context, name string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if err := checkName(name); err != nil {
		return -1, err
	}
	res, err := d.call(ctx, Cmd{Args: []string{"machine", "shell", "--name", name}, Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return -1, fmt.Errorf("smolvm machine shell %s: %w", name, err)
	}
	return res.ExitCode, nil
}

// DataDir returns the machine's host data directory (`machine data-dir`).
func (d *Driver) DataDir(ctx context.Context, name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	res, err := d.run(ctx, "machine data-dir", name, Cmd{Args: []string{"machine", "data-dir", "--name", name}})
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(string(res.Stdout))
	if dir == "" || strings.Contains(dir, "\n") {
		return "", fmt.Errorf("smolvm machine data-dir %s: unexpected output %q", name, truncate(res.Stdout))
	}
	return dir, nil
}

// CopyIn copies a host file into the machine (`machine cp SRC NAME:DST`).
func (d *Driver) CopyIn(ctx context.Context, name, src, guestPath string) error {
	if !strings.HasPrefix(guestPath, "/") {
		return fmt.Errorf("smolvm machine cp: guest path %q is not absolute", guestPath)
	}
	return d.simple(ctx, "machine cp", name, "machine", "cp", src, name+":"+guestPath)
}

// CopyOut copies a file out of the machine (`machine cp NAME:SRC DST`).
func (d *Driver) CopyOut(ctx context.Context, name, guestPath, dst string) error {
	if !strings.HasPrefix(guestPath, "/") {
		return fmt.Errorf("smolvm machine cp: guest path %q is not absolute", guestPath)
	}
	return d.simple(ctx, "machine cp", name, "machine", "cp", name+":"+guestPath, dst)
}

func (d *Driver) simple(ctx context.Context, op, name string, args ...string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, err := d.run(ctx, op, name, Cmd{Args: args})
	return err
}

// checkName applies smolvm's own rule for machine names, so a call never
// carries a name smolvm would refuse (or read as a flag).
func checkName(name string) error {
	if err := config.CheckMachineName(name, config.SmolvmNameMax); err != nil {
		return fmt.Errorf("invalid machine name: %w", err)
	}
	return nil
}

// formatDuration spells d as smolvm's --timeout accepts it.
func formatDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
}

func truncate(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// IsNotFound reports whether err says the machine does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
