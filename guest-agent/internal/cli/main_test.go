package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
)

// The test binary doubles as the agent (agentMainEnv) and as small test
// programs for the supervisor (helperEnv), so tests run the real `boot`
// in a child process without building anything.
const (
	agentMainEnv = "HERMES_BOX_AGENT_TEST_MAIN"
	helperEnv    = "HERMES_BOX_AGENT_TEST_HELPER"
)

func TestMain(m *testing.M) {
	if os.Getenv(agentMainEnv) == "1" {
		os.Unsetenv(agentMainEnv)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Run(ctx, os.Args[1:], Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
		stop()
		os.Exit(code)
	}
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(testHelper(mode, os.Args[1:]))
	}
	code := m.Run()
	stopBenchFixture()
	os.Exit(code)
}

func testHelper(mode string, args []string) int {
	switch mode {
	case "listen": // listen ADDR: a stand-in sshd
		ln, err := net.Listen("tcp", args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("listening on", ln.Addr())
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			c.Close()
		}
	case "standin": // the box's sshd and Hermes gateway, by program name
		return standin(filepath.Base(os.Args[0]))
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}
