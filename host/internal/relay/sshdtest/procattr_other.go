//go:build !hbxrelease && !linux

package sshdtest

import "syscall"

// procAttr puts sshd in its own process group (Stop signals the group).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
