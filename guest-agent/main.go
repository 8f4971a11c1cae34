// The hermes-box-agent command runs inside the box: it provisions the guest,
// supervises its services, and answers the host's relay requests.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hermes-box/hermes-box/guest-agent/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// Linked as supervisorctl, the agent answers supervisorctl's commands.
	code := cli.RunAs(ctx, filepath.Base(os.Args[0]), os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
