//go:build !hbxrelease && linux

package sshdtest

import "syscall"

// procAttr puts sshd in its own process group (Stop signals the group) and
// has the kernel kill it when the test process dies, so that a test binary
// that ends without its cleanups (a -timeout panic, a kill) leaves no sshd
// behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
