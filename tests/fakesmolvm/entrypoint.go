package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A machine created --from a packed artifact runs its Smolfile's
// entrypoint + cmd when it starts, as 1.0.4's init does: here a detached
// process in its own session (the "VM"), with the machine's root as the
// guest file system. Its pid is recorded; `stop` sends it SIGTERM, waits a
// bounded time, then kills what is left of the session; `ls`/`status` say
// `running` only while it lives.
//
// Guest ports: a published guest port whose $FAKESMOLVM_GUEST_<port> is
// unset gets a fresh loopback address of its own while the machine runs (the
// guest's address for that port). $FAKESMOLVM_BOOT_TABLE names a program
// table for `boot --table` in which "{guest:PORT}" stands for that address.

// stopWait is how long `stop` lets the entrypoint end after SIGTERM before
// it kills the machine's session.
const stopWait = 30 * time.Second

// allocGuest gives each published guest port without a fixed target a
// free port on the machine's own loopback address: one 127.0.0.0/8
// address per start, never 127.0.0.1, so that no other process on the
// host (another test's sshd or forwarder taking an ephemeral port on
// 127.0.0.1) can bind the address between its allocation here and the
// guest's bind, and the forwarder can reach no server but the guest's.
func (f *fake) allocGuest(r *record) error {
	r.Guest = map[string]string{}
	var host string
	for _, p := range r.Ports {
		_, guest, _ := strings.Cut(p, ":")
		if guest == "" {
			guest = p
		}
		if os.Getenv("FAKESMOLVM_GUEST_"+guest) != "" || len(r.Entrypoint)+len(r.Cmd) == 0 {
			continue
		}
		if host == "" {
			var err error
			if host, err = guestHost(); err != nil {
				return err
			}
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return fmt.Errorf("allocating the guest's port %s on %s: %w", guest, host, err)
		}
		r.Guest[guest] = ln.Addr().String()
		ln.Close()
	}
	return nil
}

// guestHost picks a random loopback address in 127.64.0.0/10 for a
// machine's guest ports (21 random bits, the last octet odd: two machines
// of one test run share one with a chance of about one in two million,
// and then differ by port).
func guestHost() (string, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("choosing the guest's loopback address: %w", err)
	}
	ip := net.IPv4(127, 64|b[0]&63, b[1], b[2]|1)
	return ip.String(), nil
}

// guestTarget is where the forwarder sends a published guest port.
func (r *record) guestTarget(guest int) string {
	if t := os.Getenv("FAKESMOLVM_GUEST_" + strconv.Itoa(guest)); t != "" {
		return t
	}
	return r.Guest[strconv.Itoa(guest)]
}

// startEntrypoint runs entrypoint + cmd detached and returns its pid.
func (f *fake) startEntrypoint(r *record) (int, error) {
	root := f.root(r.Name)
	argv := guestArgv(root, append(append([]string(nil), r.Entrypoint...), r.Cmd...))
	if tmpl := os.Getenv("FAKESMOLVM_BOOT_TABLE"); tmpl != "" {
		table, err := f.renderTable(r, tmpl)
		if err != nil {
			return 0, err
		}
		argv = append(argv, "--table", table)
	}
	// The guest's console, where smolvm keeps it: the machine's data
	// directory's agent-console.log (vm_data_dir(name) in src/agent).
	if err := os.MkdirAll(f.data(r.Name), 0o755); err != nil {
		return 0, err
	}
	console, err := os.OpenFile(filepath.Join(f.data(r.Name), "agent-console.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer console.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = root
	cmd.Env = append(guestEnv(), r.Env...)
	cmd.Env = append(cmd.Env, resolveSecrets(r.SecretEnv)...)
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("running the entrypoint %q: %w", argv, err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	return pid, nil
}

// guestEnv is the host environment without smolvm's and hermes-box's own
// variables: the guest sees only what the machine was given.
func guestEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HERMES_BOX_") || strings.HasPrefix(kv, "SMOLVM_") || strings.HasPrefix(kv, "FAKESMOLVM_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// renderTable writes the machine's program table with its guest addresses.
func (f *fake) renderTable(r *record, tmpl string) (string, error) {
	b, err := os.ReadFile(tmpl)
	if err != nil {
		return "", fmt.Errorf("reading FAKESMOLVM_BOOT_TABLE: %w", err)
	}
	text := string(b)
	for guest, addr := range r.Guest {
		text = strings.ReplaceAll(text, "{guest:"+guest+"}", addr)
	}
	out := filepath.Join(f.dir(r.Name), "boot-table.json")
	return out, os.WriteFile(out, []byte(text), 0o600)
}

// stopEntrypoint sends SIGTERM, waits up to stopWait, then kills every
// process left in the machine's session (the VM is gone).
func stopEntrypoint(pid int) {
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(stopWait)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	killSession(pid)
}

// killSession SIGKILLs every process of session sid and waits a bounded
// time for them to go.
func killSession(sid int) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		left := sessionMembers(sid)
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sessionMembers lists the live processes whose session id is sid.
func sessionMembers(sid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, state, err := procSession(pid)
		if err == nil && s == sid && state != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// procSession reads the session id and state of pid from /proc/PID/stat.
func procSession(pid int) (int, byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return 0, 0, errors.New("malformed stat")
	}
	sid, err := strconv.Atoi(f[3])
	return sid, f[0][0], err
}
