// The hermes-box-agent-oci command is the agent's Executor helper: the same
// verbs as hermes-box-agent, with `executor` (the image pull, activation and
// the supervisor's Executor program) run in-process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hermes-box/hermes-box/guest-agent/internal/cli"
	"github.com/hermes-box/hermes-box/guest-agent/internal/ociverb"
)

func main() {
	cli.ExecutorInProcess = ociverb.Run
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
