package cli

import (
	"context"
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// errOutputClosed ends a relayed verb whose output nobody reads any more.
var errOutputClosed = errors.New("the reader of the output went away")

// outputPollMillis bounds each wait of watchOutput, so it notices the end
// of the call within that time.
const outputPollMillis = 500

// watchOutput returns a context that is cancelled when out is a pipe or
// socket whose reading end has closed: the host's session ended (Ctrl-C on
// `hermes-box logs -f`, a lost connection) and sshd closed its end of the
// command's stdout. A verb that only waits, such as `logs -f` on a quiet
// log, would otherwise learn of it only at its next write, and stay behind
// in the box until then. stop ends the watch.
func watchOutput(ctx context.Context, out io.Writer) (_ context.Context, stop func()) {
	f, ok := out.(*os.File)
	if !ok {
		return ctx, func() {}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		for ctx.Err() == nil {
			var revents int16
			var pollErr error
			err := rc.Control(func(fd uintptr) {
				// No events asked for: poll reports only POLLERR,
				// POLLHUP and POLLNVAL, so a file, a terminal or
				// /dev/null just times out.
				fds := []unix.PollFd{{Fd: int32(fd)}}
				_, pollErr = unix.Poll(fds, outputPollMillis)
				revents = fds[0].Revents
			})
			switch {
			case err != nil || revents&unix.POLLNVAL != 0:
				return // the file is closed: nothing to watch
			case revents&(unix.POLLERR|unix.POLLHUP) != 0:
				cancel(errOutputClosed)
				return
			case pollErr != nil && !errors.Is(pollErr, unix.EINTR):
				return
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}
