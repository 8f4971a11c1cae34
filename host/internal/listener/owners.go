package listener

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// ErrForeignListener is wrapped when a process other than the expected
// one (or its descendants) listens on the port.
var ErrForeignListener = errors.New("held by a process that is not the box's")

// CheckOwner returns nil when every socket listening on TCP port is held
// by root (the box's VMM) or a descendant of it, so that what is sent to
// the port goes to the box. On Linux a socket no readable process holds is
// judged by its owner (ownersFromProc): smolvm's VMM makes itself
// non-dumpable, so a normal user cannot read its descriptors.
func (c Checker) CheckOwner(ctx context.Context, port, root int) error {
	if c.goos() == "linux" {
		return c.checkOwnerProc(ctx, port, root)
	}
	pids, err := c.Owners(ctx, port)
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return fmt.Errorf("port %d: %w", port, ErrNoListener)
	}
	return c.checkPIDs(ctx, port, root, pids)
}

// checkPIDs fails unless every pid is root or one of its descendants.
func (c Checker) checkPIDs(ctx context.Context, port, root int, pids []int) error {
	for _, pid := range pids {
		if !c.descends(ctx, pid, root) {
			return fmt.Errorf("port %d is %w: process %d listens on it, the box's VMM is %d", port, ErrForeignListener, pid, root)
		}
	}
	return nil
}

// maxDepth bounds the walk up a process's parents.
const maxDepth = 64

// descends reports whether pid is root or one of its descendants.
func (c Checker) descends(ctx context.Context, pid, root int) bool {
	for range maxDepth {
		if pid == root {
			return true
		}
		if pid <= 1 {
			return false
		}
		parent, err := c.parent(ctx, pid)
		if err != nil {
			return false
		}
		pid = parent
	}
	return false
}

// Owners returns the processes holding (on Linux: seen to hold) a listening socket on TCP port.
func (c Checker) Owners(ctx context.Context, port int) ([]int, error) {
	switch c.goos() {
	case "linux":
		o, err := c.ownersFromProc(port)
		return o.pids, err
	case "darwin":
		out, err := c.lsof(ctx, "-nP", "-F", "p", "-iTCP:"+strconv.Itoa(port), "-sTCP:LISTEN")
		if err != nil {
			return nil, err
		}
		return ParseLsofPIDs(out)
	}
	return nil, fmt.Errorf("checking listeners: unsupported host OS %s", c.goos())
}

func (c Checker) goos() string {
	if c.GOOS != "" {
		return c.GOOS
	}
	return runtime.GOOS
}

func (c Checker) proc() string {
	if c.ProcDir != "" {
		return c.ProcDir
	}
	return "/proc"
}

// ParseLsofPIDs returns the process ids in `lsof -F p` output.
func ParseLsofPIDs(b []byte) ([]int, error) {
	var pids []int
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "p")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("lsof process id %q: %w", v, err)
		}
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// parent is pid's parent process.
func (c Checker) parent(ctx context.Context, pid int) (int, error) {
	if c.goos() == "linux" {
		b, err := os.ReadFile(filepath.Join(c.proc(), strconv.Itoa(pid), "stat"))
		if err != nil {
			return 0, err
		}
		// The command name is in parentheses and may hold anything.
		_, rest, ok := strings.Cut(string(b[bytes.LastIndexByte(b, ')')+1:]), " ")
		f := strings.Fields(rest)
		if !ok || len(f) < 2 {
			return 0, fmt.Errorf("%s/%d/stat: no parent", c.proc(), pid)
		}
		return strconv.Atoi(f[1])
	}
	out, err := exec.CommandContext(ctx, "ps", "-o", "ppid=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0, fmt.Errorf("parent of process %d: %w", pid, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}
