//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// defaultPath is the PATH of the init, of exec'd commands and of the
// entrypoint unless they set their own.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// console writes a line to the kernel console (the host's console.log).
func console(format string, args ...any) {
	f, err := os.OpenFile("/dev/console", os.O_WRONLY|syscall.O_NOCTTY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "guestinit: "+format+"\n", args...)
}

type mount struct {
	source, target, fstype, data string
	mode                         os.FileMode
}

var mounts = []mount{
	{"proc", "/proc", "proc", "", 0o555},
	{"sysfs", "/sys", "sysfs", "", 0o555},
	{"devtmpfs", "/dev", "devtmpfs", "mode=0755", 0o755},
	{"devpts", "/dev/pts", "devpts", "gid=5,mode=620,ptmxmode=666", 0o755},
	{"tmpfs", "/dev/shm", "tmpfs", "mode=1777", 0o1777},
	{"tmpfs", "/run", "tmpfs", "mode=0755", 0o755},
}

// pid1 sets up the kernel file systems, starts the server as a child and
// reaps every process re-parented to it. If the server dies the machine
// powers off, so the host sees the VM stop instead of hanging.
func pid1() {
	os.Setenv("PATH", defaultPath)
	for _, m := range mounts {
		_ = os.MkdirAll(m.target, m.mode)
		if err := syscall.Mount(m.source, m.target, m.fstype, syscall.MS_NOSUID, m.data); err != nil {
			console("mount %s: %v", m.target, err)
		}
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REMOUNT, ""); err != nil {
		console("remount / rw: %v", err)
	}
	_ = os.Chmod("/tmp", 0o1777)
	if owner := kernelArgs()["smolvm.remap"]; owner != "" {
		remapBoot(owner)
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := exec.Command("/proc/self/exe", "serve")
	cmd.Stdout, cmd.Stderr = consoleFile(), consoleFile()
	if err := cmd.Start(); err != nil {
		console("starting server: %v", err)
		powerOff()
	}
	server := cmd.Process.Pid
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.ECHILD {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if pid == server {
			console("server exited (%v); powering off", ws)
			powerOff()
		}
	}
}

func consoleFile() *os.File {
	f, err := os.OpenFile("/dev/console", os.O_WRONLY|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	return f
}

// powerOff ends every process, flushes and powers the machine off (QEMU
// exits through ACPI).
func powerOff() {
	_ = syscall.Kill(-1, syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	_ = syscall.Kill(-1, syscall.SIGKILL)
	syscall.Sync()
	if err := syscall.Mount("", "/", "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		console("remount / ro: %v", err)
	}
	syscall.Sync()
	if err := syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		console("power off: %v", err)
	}
	select {}
}
