package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

// startForwarder runs `fakesmolvm _forward` detached, the machine's VMM
// process with its published ports, and waits until it runs and listens
// (or says why it cannot).
func (f *fake) startForwarder(r *record) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	bind := os.Getenv("SMOLVM_PUBLISH_ADDR")
	if bind == "" {
		bind = "127.0.0.1"
	}
	args := []string{"_forward", bind}
	for _, p := range r.Ports {
		host, guest := smolvmcli.ParsePortMap(p)
		target := r.guestTarget(guest)
		args = append(args, fmt.Sprintf("%d=%s", host, target))
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	logf, err := os.OpenFile(filepath.Join(f.dir(r.Name), "forwarder.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		wr.Close()
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{wr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	wr.Close()
	if err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	rd.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(rd).ReadString('\n')
	if strings.TrimSpace(line) != "ok" {
		stopForwarder(pid)
		return 0, fmt.Errorf("publishing ports: %s%v", strings.TrimSpace(line), errOrNil(err))
	}
	return pid, nil
}

func errOrNil(err error) any {
	if err == nil || errors.Is(err, io.EOF) {
		return ""
	}
	return err
}

// stopForwarder ends the forwarder and waits a bounded time for it to go.
func stopForwarder(pid int) {
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// forwardMain is the `_forward BIND [HOSTPORT=TARGET...]` daemon, the
// machine's VMM process (smolvm's `_boot-vm`): it runs while the machine
// does, makes itself non-dumpable (hardenSelf), confines itself as the VMM does under SMOLVM_SECCOMP=enforce
// (failing closed), then, like 1.0.4, listens on BIND and best effort on
// the IPv6 twin (127.0.0.1 → ::1, 0.0.0.0 → ::), reports "ok" on fd 3, and
// forwards until SIGTERM.
func forwardMain(args []string) int {
	ready := os.NewFile(3, "ready")
	if len(args) < 1 {
		fmt.Fprintln(ready, "error: usage: _forward BIND [HOSTPORT=TARGET...]")
		return 2
	}
	if err := hardenSelf(); err != nil {
		fmt.Fprintf(ready, "error: harden_self: %v\n", err)
		return 1
	}
	if os.Getenv("SMOLVM_SECCOMP") == "enforce" && !broken(brokenUnconfinedVMM) {
		if err := installSeccomp(); err != nil {
			fmt.Fprintf(ready, "error: [seccomp] enforce install failed, refusing to boot unconfined: %v\n", err)
			return 1
		}
	}
	var listeners []net.Listener
	for _, m := range args[1:] {
		port, target, _ := strings.Cut(m, "=")
		ln, err := net.Listen("tcp", net.JoinHostPort(args[0], port))
		if err != nil {
			fmt.Fprintf(ready, "error: %v\n", err)
			return 1
		}
		listeners = append(listeners, ln)
		go serve(ln, target)
		if twin := ipv6Twin(args[0]); twin != "" {
			if ln6, err := net.Listen("tcp6", net.JoinHostPort(twin, port)); err == nil {
				listeners = append(listeners, ln6)
				go serve(ln6, target)
			}
		}
	}
	fmt.Fprintln(ready, "ok")
	ready.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	for _, l := range listeners {
		l.Close()
	}
	return 0
}

func ipv6Twin(bind string) string {
	switch bind {
	case "127.0.0.1":
		return "::1"
	case "0.0.0.0":
		return "::"
	}
	return ""
}

// serve forwards every connection to target, or closes it when there is no
// target (nothing listens in the guest).
func serve(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go proxy(c, target)
	}
}

func proxy(c net.Conn, target string) {
	defer c.Close()
	if target == "" {
		return
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}
	wg.Go(func() { pipe(up, c) })
	wg.Go(func() { pipe(c, up) })
	wg.Wait()
}
