package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// ownerVar names the process that owns the fake's machines (a test
// binary): when it dies without stopping them (a -timeout panic, a kill),
// a watcher stops each machine's processes, so none outlives the tests.
const ownerVar = "FAKESMOLVM_OWNER_PID"

// startWatch runs `fakesmolvm _watch OWNER ENTRY FORWARDER` detached when
// $FAKESMOLVM_OWNER_PID is set.
func startWatch(r *record) {
	owner := os.Getenv(ownerVar)
	if owner == "" || (r.EntryPID == 0 && r.PID == 0) {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	cmd := exec.Command(exe, "_watch", owner, strconv.Itoa(r.EntryPID), strconv.Itoa(r.PID))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		cmd.Process.Release()
	}
}

// watchMain polls the owner twice a second: when it is gone, it stops the
// entrypoint and the forwarder as `machine stop` does; when both are gone
// (the machine was stopped), it ends.
func watchMain(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: _watch OWNER ENTRY FORWARDER")
		return 2
	}
	var pids [3]int
	for i, a := range args {
		pids[i], _ = strconv.Atoi(a)
	}
	owner, entry, fwd := pids[0], pids[1], pids[2]
	for {
		time.Sleep(500 * time.Millisecond)
		if (entry == 0 || !alive(entry)) && (fwd == 0 || !alive(fwd)) {
			return 0
		}
		if owner > 0 && !alive(owner) {
			if entry > 0 {
				stopEntrypoint(entry)
			}
			if fwd > 0 {
				stopForwarder(fwd)
			}
			return 0
		}
	}
}
