//go:build linux

package smolvm

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
)

// procSeccompMode reads the Seccomp field of /proc/<pid>/status: 0 none,
// 1 strict, 2 filter.
func procSeccompMode(pid int) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Seccomp:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no Seccomp field (a kernel without seccomp)")
}
