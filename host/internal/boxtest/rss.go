//go:build !hbxrelease

package boxtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// WatchHWM reads the peak resident set (VmHWM, KiB) of pid every 10 ms
// until stop closes or the process is gone, and returns the last value
// read (0 without /proc).
func WatchHWM(pid int, stop <-chan struct{}) int64 {
	var hwm int64
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return hwm
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil && n > hwm {
					hwm = n
				}
			}
		}
		select {
		case <-stop:
			return hwm
		case <-t.C:
		}
	}
}

// Hostile makes every machine's agent (candidates too) answer name (VERB
// or VERB.SUB) with case c (tests/testagent's hostile cases); it returns
// the file, beside which the hang case leaves NAME.reached.
func (p *Project) Hostile(name, c string) string {
	p.T.Helper()
	f := filepath.Join(p.State, "hostile", name)
	Must(p.T, os.MkdirAll(filepath.Dir(f), 0o755))
	Must(p.T, os.WriteFile(f, []byte(c), 0o644))
	return f
}
