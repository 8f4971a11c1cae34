// Command e2e-smolvm is `make e2e-smolvm`: the disposable lifecycle test
// against real smolvm (see package lifecycle). It refuses to run without
// HERMES_BOX_E2E=1, smolvm on PATH, and disposable names and ports.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hermes-box/hermes-box/tests/lifecycle"
)

func main() {
	os.Exit(run())
}

func run() int {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: e2e-smolvm PATH-TO-hermes-box")
		return 2
	}
	bin, err := filepath.Abs(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-smolvm:", err)
		return 2
	}
	cfg, err := lifecycle.FromEnv(lifecycle.Env{Getenv: os.Getenv, LookPath: exec.LookPath}, bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-smolvm:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "hermes-box-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-smolvm:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := lifecycle.New(cfg, os.Environ(), dir, lifecycle.Exec{Bin: bin})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-smolvm:", err)
		return 1
	}
	err = l.Run(ctx)
	l.PrintTable(os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-smolvm:", err)
		return 1
	}
	fmt.Println("disposable lifecycle test passed")
	return 0
}
