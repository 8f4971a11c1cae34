package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/machine"
)

// execCmd is `machine exec` (--name only: 1.0.4 has no -n on exec).
func execCmd(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	env, err := envList(in)
	if err != nil {
		return err
	}
	var timeout time.Duration
	if in.Has("timeout") {
		// The grammar has checked the syntax.
		if timeout, err = smolvmcli.ParseDuration(in.Value("timeout")); err != nil || timeout <= 0 {
			return &smolvmcli.UsageError{Msg: fmt.Sprintf("invalid value '%s' for '--timeout <TIMEOUT>': expected a positive duration", in.Value("timeout"))}
		}
	}
	o := machine.ExecOptions{Argv: in.Trailing, Env: env, Workdir: in.Value("workdir"), Timeout: timeout, Stream: in.Has("stream")}
	return runExec(ctx, nameOrDefault(in), o, stdio)
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

// shell runs a login shell with stdin and output streamed (no PTY: the
// stand-in's channel carries plain streams).
func shell(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	return runExec(ctx, nameOrDefault(in), machine.ExecOptions{Argv: []string{"/bin/bash", "-l"}, Stream: true}, stdio)
}

// cp copies one file; NAME:/path marks the guest side, which must be
// exactly one of the two.
func cp(ctx context.Context, in *smolvmcli.Invocation, _ IO) error {
	srcVM, srcPath, srcGuest := guestRef(in.Args[0])
	dstVM, dstPath, dstGuest := guestRef(in.Args[1])
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

func packCreate(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	if !in.Has("from-vm") {
		return fmt.Errorf("config operation failed: pack: the QEMU stand-in packs only --from-vm machines")
	}
	sf := in.Value("smolfile")
	if sf == "" {
		return fmt.Errorf("config operation failed: pack: the QEMU stand-in needs --smolfile")
	}
	err := locked(func(s *machine.Store) error {
		return s.PackCreate(ctx, in.Value("from-vm"), sf, in.Value("output"), Version)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "Packed machine '%s' to %s and %s.smolmachine\n", in.Value("from-vm"), in.Value("output"), in.Value("output"))
	return nil
}
