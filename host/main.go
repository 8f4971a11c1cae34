// The hermes-box command runs the Hermes Agent in an isolated smolvm
// microVM: it creates, starts, stops, backs up and restores the box.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/hermes-box/hermes-box/host/internal/cli"
)

// memoryLimit is the collector's soft target. The host holds one bounded
// stream at a time, so a guest's flood is garbage; the limit keeps the
// collector ahead of it when the machine is loaded (the hostile tests hold
// the host to 64 MiB under a flood). GOMEMLIMIT overrides it.
const memoryLimit = 40 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	// Every way the caller can go away ends the command as Ctrl-C does,
	// so the box is put back as it was: SIGHUP (a closed terminal or SSH
	// session), and a closed stdout or stderr (cli.Output).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	ctx, gone := context.WithCancelCause(ctx)
	// With SIGPIPE asked for, a write to a closed pipe returns EPIPE
	// instead of killing the process; the signal itself is dropped.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, cli.Output(os.Stdout, gone), cli.Output(os.Stderr, gone))
	stop()
	os.Exit(code)
}
