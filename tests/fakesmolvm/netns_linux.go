//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// isolateNet makes cmd start as `fakesmolvm _netns` in a fresh network
// namespace (and, for a user who is not root, a user namespace mapping
// them to root in it, as `unshare -rn` does), which routes reach to lo and
// then becomes the command.
func isolateNet(cmd *exec.Cmd, reach []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd.Args = append([]string{exe, "_netns", strings.Join(reach, ","), "--", cmd.Path}, cmd.Args...)
	cmd.Path = exe
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNET
	if uid := os.Geteuid(); uid != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return nil
}

// routeLocal brings lo up and routes each prefix to it as local addresses
// (iproute2's `ip route add local`), so a connect to any of them is
// refused; with none, lo stays down and nothing is reachable.
func routeLocal(prefixes []string) error {
	if len(prefixes) == 0 {
		return nil
	}
	ip, err := ipCommand()
	if err != nil {
		return err
	}
	steps := [][]string{{"link", "set", "lo", "up"}}
	for _, p := range prefixes {
		steps = append(steps, []string{"route", "add", "local", p, "dev", "lo"})
	}
	for _, s := range steps {
		if out, err := exec.Command(ip, s...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", s, err, out)
		}
	}
	return nil
}

// ipCommand finds iproute2's ip, also in the sbin directories a user's
// PATH may lack.
func ipCommand() (string, error) {
	if p, err := exec.LookPath("ip"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("iproute2's ip is not installed")
}

// execInPlace replaces this process with the command.
func execInPlace(path string, argv []string) int {
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "Error: exec %s: %v\n", path, err)
	return 127
}
