package hangup

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"
	"time"
)

// ErrClosed is the cause of a watch's context when the reader of the
// output went away.
var ErrClosed = errors.New("the reader of the output went away")

// pollInterval bounds each wait of Watch, so that it notices the end of
// the watch within that time.
const pollInterval = 500 * time.Millisecond

// Watch returns a context that is cancelled with ErrClosed when out is a
// pipe or socket whose reading end has closed (sshd closed its end of the
// command's stdout). A file, a terminal, /dev/null or a writer that is not
// an *os.File is not watched: the context is ctx's. stop ends the watch.
func Watch(ctx context.Context, out io.Writer) (_ context.Context, stop func()) {
	f, ok := out.(*os.File)
	if !ok {
		return ctx, func() {}
	}
	epfd, err := watchFile(f)
	if err != nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		defer syscall.Close(epfd)
		if hungUp(ctx, epfd) {
			cancel(ErrClosed)
		}
	}()
	return ctx, func() { cancel(nil) }
}

// watchFile returns an epoll instance that holds f with no events asked
// for: epoll reports only EPOLLERR and EPOLLHUP then, so an open pipe just
// times out. A regular file or /dev/null cannot be held (EPERM).
func watchFile(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return -1, err
	}
	var ctlErr error
	if err := rc.Control(func(fd uintptr) {
		ctlErr = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(fd), &syscall.EpollEvent{Fd: int32(fd)})
	}); err != nil || ctlErr != nil {
		syscall.Close(epfd)
		return -1, errors.Join(err, ctlErr)
	}
	return epfd, nil
}

// hungUp waits on epfd until its file reports a hang-up or an error (true),
// or ctx ends or the wait fails (false).
func hungUp(ctx context.Context, epfd int) bool {
	events := make([]syscall.EpollEvent, 1)
	for ctx.Err() == nil {
		n, err := syscall.EpollWait(epfd, events, int(pollInterval/time.Millisecond))
		switch {
		case err != nil && !errors.Is(err, syscall.EINTR):
			return false
		case n > 0 && events[0].Events&(syscall.EPOLLERR|syscall.EPOLLHUP) != 0:
			return true
		}
	}
	return false
}
