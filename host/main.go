// The hermes-box command runs the Hermes Agent in an isolated smolvm
// microVM: it creates, starts, stops, backs up and restores the box.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hermes-box/hermes-box/host/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
