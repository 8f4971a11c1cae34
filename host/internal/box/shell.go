package box

import (
	"context"
	"fmt"
	"io"
)

// ExitStatus is a status passed through unchanged (of `ssh CMD`, of the
// console); it prints nothing more.
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// ExitCode is the status.
func (e ExitStatus) ExitCode() int { return int(e) }

// Shell opens the out-of-band root console (smolvm machine shell) on the
// given streams; a non-zero status is an ExitStatus.
func Shell(ctx context.Context, b *Box, stdin io.Reader, stdout, stderr io.Writer) error {
	if _, err := machineState(ctx, b, b.cfg.MachineName); err != nil {
		return err
	}
	code, err := b.vm.Shell(ctx, b.cfg.MachineName, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	if code != 0 {
		return ExitStatus(code)
	}
	return nil
}
