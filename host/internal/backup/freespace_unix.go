//go:build linux || darwin

package backup

import "golang.org/x/sys/unix"

// HostFreeSpace reports the bytes available to this user on the file
// system holding dir.
func HostFreeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
