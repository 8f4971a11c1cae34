// Package cli is the command line of the smolvm stand-in. It parses with the
// one smolvm 1.0.4 grammar of the tests (tests/internal/smolvmcli, shared
// with the contract fake: usage errors print "error: ..." and exit 2),
// implements the subset hermes-box uses and refuses the rest by name, with
// smolvm's runtime errors ("Error: ..." and exit 1) and exec's exit code
// passthrough.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/machine"
)

// Version is the smolvm release the stand-in imitates.
var Version = strings.TrimPrefix(smolvmcli.Version, "smolvm ")

// IO is the process's standard streams and environment lookups.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// exitError carries a command's exit code without a message (exec).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Main runs one command line and returns the process exit code.
func Main(ctx context.Context, argv []string, stdio IO) int {
	in, err := smolvmcli.Parse(argv)
	if err != nil {
		return smolvmcli.ReportUsage(stdio.Stderr, err)
	}
	if in.Version {
		fmt.Fprintln(stdio.Stdout, smolvmcli.Version)
		return 0
	}
	if in.Help {
		fmt.Fprint(stdio.Stdout, smolvmcli.Help(in.Command))
		return 0
	}
	err = dispatch(ctx, in, stdio)
	var ue *smolvmcli.UsageError
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return smolvmcli.ReportUsage(stdio.Stderr, ue)
	default:
		return smolvmcli.Fail(stdio.Stderr, "%v", err)
	}
}

// handler runs one parsed subcommand.
type handler struct {
	run func(context.Context, *smolvmcli.Invocation, IO) error
	// flags are the options the stand-in implements; 1.0.4 accepts more,
	// which the stand-in refuses by name instead of ignoring them.
	flags []string
}

var handlers = map[string]handler{
	"machine create":   {create, []string{"name", "image", "from", "cpus", "mem", "storage", "overlay", "port", "env", "secret-env", "net", "net-backend"}},
	"machine start":    {start, []string{"name"}},
	"machine stop":     {stop, []string{"name"}},
	"machine delete":   {del, []string{"name", "force"}},
	"machine status":   {status, []string{"name", "json"}},
	"machine ls":       {list, []string{"verbose", "json"}},
	"machine exec":     {execCmd, []string{"name", "workdir", "env", "timeout", "interactive", "stream"}},
	"machine cp":       {cp, nil},
	"machine update":   {update, []string{"name", "net"}},
	"machine data-dir": {dataDir, []string{"name"}},
	"machine shell":    {shell, []string{"name"}},
	"pack create":      {packCreate, []string{"from-vm", "output", "smolfile"}},
}

// dispatch runs a parsed command line that smolvm 1.0.4 accepts, or says
// that the stand-in does not implement it.
func dispatch(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	h, ok := handlers[in.Command.Name()]
	if !ok {
		return fmt.Errorf("config operation failed: the QEMU stand-in does not implement 'smolvm %s'", in.Command.Name())
	}
	for _, f := range in.Command.Flags {
		if in.Has(f.Long) && !slices.Contains(h.flags, f.Long) {
			return fmt.Errorf("config operation failed: the QEMU stand-in does not support --%s on 'smolvm %s'", f.Long, in.Command.Name())
		}
	}
	return h.run(ctx, in, stdio)
}

// store opens the state dir: SMOLVM_QEMU_STATE, else
// $XDG_RUNTIME_DIR/smolvm-qemu, else <tmp>/smolvm-qemu-<uid>.
func store() (*machine.Store, error) {
	dir := os.Getenv("SMOLVM_QEMU_STATE")
	if dir == "" {
		if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
			dir = filepath.Join(rt, "smolvm-qemu")
		} else {
			dir = filepath.Join(os.TempDir(), fmt.Sprintf("smolvm-qemu-%d", os.Getuid()))
		}
	}
	return machine.Open(dir)
}

// locked runs fn with the state dir locked.
func locked(fn func(*machine.Store) error) error {
	s, err := store()
	if err != nil {
		return err
	}
	unlock, err := s.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	return fn(s)
}

// keyValue splits K=V, as smolvm's --env and --secret-env require.
func keyValue(flag, spec string) (string, string, error) {
	k, v, ok := strings.Cut(spec, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("config operation failed: %s: expected KEY=VALUE, got '%s'", flag, spec)
	}
	return k, v, nil
}

func envList(in *smolvmcli.Invocation) ([]string, error) {
	var env []string
	for _, spec := range in.Values["env"] {
		if _, _, err := keyValue("--env", spec); err != nil {
			return nil, err
		}
		env = append(env, spec)
	}
	return env, nil
}
