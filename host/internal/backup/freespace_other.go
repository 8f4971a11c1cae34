//go:build !linux && !darwin

package backup

import "errors"

// HostFreeSpace is not known on this system.
func HostFreeSpace(string) (int64, error) {
	return 0, errors.New("free space is not known on this system")
}
