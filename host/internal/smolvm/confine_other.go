//go:build !linux

package smolvm

import "errors"

// procSeccompMode fails: there is no /proc/<pid>/status seccomp field
// outside Linux, and smolvm confines its VMM on Linux only.
func procSeccompMode(int) (string, error) {
	return "", errors.New("seccomp is Linux-only")
}
