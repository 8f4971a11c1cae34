package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/machine"
)

// exec takes --name only (no -n in 1.0.4).
var execGrammar = command{
	usage: "smolvm machine exec [OPTIONS] -- <COMMAND>...",
	flags: []flagSpec{
		{long: "name", value: "NAME"}, {long: "workdir", short: 'w', value: "WORKDIR"},
		{long: "env", short: 'e', value: "KEY=VALUE", repeat: true}, {long: "timeout", value: "TIMEOUT"},
		{long: "interactive", short: 'i'}, {long: "tty", short: 't'}, {long: "stream"},
	},
	trailing: true, needsTrail: true,
}

func execCmd(ctx context.Context, argv []string, stdio IO) error {
	a, err := execGrammar.parse(argv)
	if err != nil {
		return err
	}
	if a.has("tty") {
		return fmt.Errorf("config operation failed: exec: -t/--tty is not supported by the QEMU stand-in")
	}
	env, err := envList(a)
	if err != nil {
		return err
	}
	timeout, err := parseTimeout(a.get("timeout"))
	if err != nil {
		return err
	}
	o := machine.ExecOptions{Argv: a.trail, Env: env, Workdir: a.get("workdir"), Timeout: timeout, Stream: a.has("stream")}
	return runExec(ctx, nameOrDefault(a), o, stdio)
}

func runExec(ctx context.Context, name string, o machine.ExecOptions, stdio IO) error {
	s, err := store()
	if err != nil {
		return err
	}
	code, err := s.Exec(ctx, name, o, stdio.Stdin, stdio.Stdout, stdio.Stderr)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitError{code}
	}
	return nil
}

// parseTimeout reads "30s", "5m", "1h30m" or plain seconds.
func parseTimeout(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.ReplaceAll(v, " ", ""))
	if err != nil {
		var n int
		if _, scanErr := fmt.Sscanf(v, "%d", &n); scanErr == nil && fmt.Sprint(n) == v {
			d, err = time.Duration(n)*time.Second, nil
		}
	}
	if err != nil || d <= 0 {
		return 0, &usageError{fmt.Sprintf("invalid value '%s' for '--timeout <TIMEOUT>': expected a duration such as 30s or 5m", v), execGrammar.usage}
	}
	return d, nil
}

var shellCmd = command{usage: "smolvm machine shell [OPTIONS]", flags: []flagSpec{nameFlag(false)}}

// shell runs a login shell with stdin and output streamed (no PTY: the
// stand-in's channel carries plain streams).
func shell(ctx context.Context, argv []string, stdio IO) error {
	a, err := shellCmd.parse(argv)
	if err != nil {
		return err
	}
	return runExec(ctx, nameOrDefault(a), machine.ExecOptions{Argv: []string{"/bin/bash", "-l"}, Stream: true}, stdio)
}

var cpCmd = command{usage: "smolvm machine cp <SRC> <DST>", positional: 2}

// cp copies one file; NAME:/path marks the guest side, which must be
// exactly one of the two.
func cp(ctx context.Context, argv []string, stdio IO) error {
	a, err := cpCmd.parse(argv)
	if err != nil {
		return err
	}
	srcVM, srcPath, srcGuest := guestRef(a.pos[0])
	dstVM, dstPath, dstGuest := guestRef(a.pos[1])
	if srcGuest == dstGuest {
		return fmt.Errorf("config operation failed: cp: exactly one of SRC and DST must be NAME:/path")
	}
	s, err := store()
	if err != nil {
		return err
	}
	if dstGuest {
		return s.CopyIn(ctx, dstVM, srcPath, dstPath)
	}
	return s.CopyOut(ctx, srcVM, srcPath, dstPath)
}

// guestRef splits NAME:/path.
func guestRef(arg string) (string, string, bool) {
	name, path, ok := strings.Cut(arg, ":")
	if !ok || !machine.ValidName(name) || !strings.HasPrefix(path, "/") {
		return "", arg, false
	}
	return name, path, true
}

var packCmd = command{
	usage: "smolvm pack create [OPTIONS] --output <OUTPUT>",
	flags: []flagSpec{
		{long: "from-vm", value: "VM_NAME"}, {long: "output", short: 'o', value: "OUTPUT", required: true},
		{long: "smolfile", short: 's', value: "SMOLFILE"},
	},
}

func packCreate(ctx context.Context, argv []string, stdio IO) error {
	a, err := packCmd.parse(argv)
	if err != nil {
		return err
	}
	if !a.has("from-vm") {
		return fmt.Errorf("config operation failed: pack: the QEMU stand-in packs only --from-vm machines")
	}
	sf := a.get("smolfile")
	if sf == "" {
		return fmt.Errorf("config operation failed: pack: the QEMU stand-in needs --smolfile")
	}
	err = locked(func(s *machine.Store) error {
		return s.PackCreate(ctx, a.get("from-vm"), sf, a.get("output"), Version)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "Packed machine '%s' to %s and %s.smolmachine\n", a.get("from-vm"), a.get("output"), a.get("output"))
	return nil
}
