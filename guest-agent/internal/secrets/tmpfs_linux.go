package secrets

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// tmpfsMagic is TMPFS_MAGIC of statfs(2).
const tmpfsMagic = 0x01021994

// EnsureTmpfs makes <root>/Dir a tmpfs: in the box (root "/") it mounts
// one when the directory is on anything else; under a test root it only
// reports whether it is one.
func EnsureTmpfs(root string) (bool, error) {
	dir := filepath.Join(root, boxlayout.SecretsDir)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return false, fmt.Errorf("creating %s: %w", dir, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Type == tmpfsMagic {
		return true, nil
	}
	if root != "/" {
		return false, nil
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "mode=0711,size=1m"); err != nil {
		return false, fmt.Errorf("mounting a tmpfs on %s: %w", dir, err)
	}
	return true, nil
}
