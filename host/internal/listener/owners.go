package listener

import (
	"bufio"
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

// CheckOwner returns nil when every process listening on TCP port is root
// or a descendant of root (the box's VMM), so that what is sent to the
// port goes to the box.
func (c Checker) CheckOwner(ctx context.Context, port, root int) error {
	pids, err := c.Owners(ctx, port)
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return fmt.Errorf("port %d: %w", port, ErrNoListener)
	}
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

// Owners returns the processes holding a listening socket on TCP port.
func (c Checker) Owners(ctx context.Context, port int) ([]int, error) {
	switch c.goos() {
	case "linux":
		return c.ownersFromProc(port)
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

// ownersFromProc finds the listening sockets' inodes in /proc/net/tcp{,6}
// and the processes whose descriptors point at them.
func (c Checker) ownersFromProc(port int) ([]int, error) {
	inodes := map[string]bool{}
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(c.proc(), "net", name))
		if errors.Is(err, os.ErrNotExist) && name == "tcp6" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("checking listeners: %w", err)
		}
		if err := listenInodes(b, port, inodes); err != nil {
			return nil, fmt.Errorf("checking listeners in %s: %w", name, err)
		}
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	entries, err := os.ReadDir(c.proc())
	if err != nil {
		return nil, fmt.Errorf("checking listeners: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join(c.proc(), e.Name(), "fd")) // a process that is gone, or not ours to read
		for _, fd := range fds {
			link, _ := os.Readlink(filepath.Join(c.proc(), e.Name(), "fd", fd.Name()))
			if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
				pids = append(pids, pid)
				break
			}
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// listenInodes adds the inodes of the sockets listening on port in the
// text of /proc/net/tcp or tcp6 to inodes.
func listenInodes(b []byte, port int, inodes map[string]bool) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if n == 1 || len(fields) < 10 || fields[3] != "0A" {
			continue
		}
		_, p, err := parseHexAddr(fields[1])
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if p == port {
			inodes[fields[9]] = true
		}
	}
	return sc.Err()
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
