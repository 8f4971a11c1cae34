// Command smolvm-qemu stands in for smolvm 1.0.4 in the end-to-end tests:
// the same command-line grammar, JSON and exit codes, backed by QEMU
// virtual machines (TCG here, KVM where the host has working hardware
// virtualisation). Tests put it first on PATH as `smolvm`.
//
// Environment: SMOLVM_QEMU_STATE (state dir), SMOLVM_QEMU_IMAGE (the
// directory built by images/e2e/build.sh, used for every --image),
// SMOLVM_QEMU_ACCEL (tcg|kvm), SMOLVM_QEMU_BOOT_TIMEOUT and
// SMOLVM_QEMU_STOP_TIMEOUT (seconds).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
