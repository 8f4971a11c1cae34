package box

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// maxHolderBytes bounds what operationInProgress reads of the holder file.
const maxHolderBytes = 4 << 10

// operationInProgress is the command holding the operation lock as
// recordHolder wrote it ("pid N: hermes-box snapshot x (since …)"), or ""
// when the process it names is gone (a killed run leaves its holder file)
// or is this one. It reads; it never takes the lock, so a command
// starting meanwhile is not refused because of a status.
func operationInProgress(b *Box) string {
	f, err := os.Open(filepath.Join(b.cfg.StateDir(), filenames.OperationHolder))
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, maxHolderBytes)
	n, _ := f.Read(buf)
	text := strings.TrimSpace(string(buf[:n]))
	var pid int
	if _, err := fmt.Sscanf(text, "pid %d:", &pid); err != nil || pid <= 0 || pid == os.Getpid() {
		return ""
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return ""
	}
	return termsafe.String(text)
}
