// Package cli is the command line of the smolvm stand-in: the subset of the
// smolvm 1.0.4 grammar hermes-box uses, parsed as clap parses it (usage
// errors print "error: ..." and exit 2) with smolvm's runtime errors
// ("Error: ..." and exit 1) and exec's exit code passthrough.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/machine"
)

// Version is the smolvm release the stand-in imitates.
const Version = "1.0.4"

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
	err := dispatch(ctx, argv, stdio)
	var ue *usageError
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintln(stdio.Stderr, ue.Error())
		return 2
	default:
		fmt.Fprintf(stdio.Stderr, "Error: %v\n", err)
		return 1
	}
}

const topUsage = "smolvm <COMMAND>"

func dispatch(ctx context.Context, argv []string, stdio IO) error {
	if len(argv) == 0 {
		return &usageError{"'smolvm' requires a subcommand but one was not provided", topUsage}
	}
	switch argv[0] {
	case "--version", "-V":
		fmt.Fprintf(stdio.Stdout, "smolvm %s\n", Version)
		return nil
	case "--help", "-h", "help":
		fmt.Fprintf(stdio.Stdout, "smolvm %s (QEMU stand-in for tests)\n\nUsage: %s\n\nCommands: machine (vm), pack\n", Version, topUsage)
		return nil
	case "machine", "vm":
		return machineCmd(ctx, argv[1:], stdio)
	case "pack":
		if len(argv) < 2 || argv[1] != "create" {
			return &usageError{"the stand-in supports only 'pack create'", "smolvm pack create [OPTIONS] --output <OUTPUT>"}
		}
		return packCreate(ctx, argv[2:], stdio)
	}
	return &usageError{fmt.Sprintf("unrecognized subcommand '%s'", argv[0]), topUsage}
}

func machineCmd(ctx context.Context, argv []string, stdio IO) error {
	if len(argv) == 0 {
		return &usageError{"'smolvm machine' requires a subcommand but one was not provided", "smolvm machine <COMMAND>"}
	}
	cmds := map[string]func(context.Context, []string, IO) error{
		"create": create, "start": start, "stop": stop, "delete": del, "rm": del,
		"status": status, "ls": list, "list": list, "exec": execCmd, "cp": cp,
		"update": update, "data-dir": dataDir, "shell": shell, "sh": shell,
	}
	run, ok := cmds[argv[0]]
	if !ok {
		return &usageError{fmt.Sprintf("unrecognized subcommand '%s'", argv[0]), "smolvm machine <COMMAND>"}
	}
	return run(ctx, argv[1:], stdio)
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

func envList(a *args) ([]string, error) {
	var env []string
	for _, spec := range a.vals["env"] {
		if _, _, err := keyValue("--env", spec); err != nil {
			return nil, err
		}
		env = append(env, spec)
	}
	return env, nil
}
