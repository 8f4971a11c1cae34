//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/images/e2e/guestinit/wire"
)

// entry is the machine's entrypoint process, started at most once per boot.
var entry struct {
	sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// boot starts the entrypoint (if the machine has one) in its own session,
// with its output on the console. A second request in the same boot is
// acknowledged and ignored.
func (p *port) boot(s *session, payload []byte) {
	var req wire.BootRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		p.fail(s, fmt.Errorf("bad boot request: %w", err))
		return
	}
	entry.Lock()
	defer entry.Unlock()
	if entry.done != nil || len(req.Argv) == 0 {
		p.send(s, wire.OK, nil)
		return
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env, cmd.Dir = req.Env, req.Dir
	cmd.Stdout, cmd.Stderr = consoleFile(), consoleFile()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		p.fail(s, fmt.Errorf("starting entrypoint %q: %w", req.Argv[0], err))
		return
	}
	entry.cmd, entry.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		err := cmd.Wait()
		console("entrypoint exited: %v", err)
		close(done)
	}(entry.done)
	console("entrypoint started: pid %d", cmd.Process.Pid)
	p.send(s, wire.OK, nil)
}

// shutdown stops the entrypoint with SIGTERM (its whole session), waits up
// to 10 s for it, then ends everything and powers off.
func shutdown() {
	entry.Lock()
	cmd, done := entry.cmd, entry.done
	entry.Unlock()
	if cmd != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			console("entrypoint still running after 10 s; killing it")
		}
	}
	powerOff()
}
