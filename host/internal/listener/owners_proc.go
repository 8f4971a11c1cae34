package listener

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// socket is a listening socket in /proc/net/tcp{,6}: its inode and the
// uid that owns it.
type socket struct {
	inode string
	uid   int
}

// procOwners is what /proc tells about a port's listening sockets.
type procOwners struct {
	// sockets listen on the port.
	sockets []socket
	// pids hold one of them in a descriptor this user can read.
	pids []int
	// held marks the inodes those descriptors point at.
	held map[string]bool
	// hidden are the processes whose descriptors this user cannot read
	// (a non-dumpable process, such as smolvm's VMM, or another user's).
	hidden map[int]bool
}

// ownersFromProc finds the listening sockets on port in /proc/net/tcp{,6}
// and the processes whose descriptors point at them, noting the processes
// whose descriptors it cannot read.
func (c Checker) ownersFromProc(port int) (procOwners, error) {
	o := procOwners{held: map[string]bool{}, hidden: map[int]bool{}}
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(c.proc(), "net", name))
		if errors.Is(err, os.ErrNotExist) && name == "tcp6" {
			continue
		}
		if err != nil {
			return o, fmt.Errorf("checking listeners: %w", err)
		}
		ss, err := listenSockets(b, port)
		if err != nil {
			return o, fmt.Errorf("checking listeners in %s: %w", name, err)
		}
		o.sockets = append(o.sockets, ss...)
	}
	if len(o.sockets) == 0 {
		return o, nil
	}
	inodes := map[string]bool{}
	for _, s := range o.sockets {
		inodes[s.inode] = true
	}
	entries, err := os.ReadDir(c.proc())
	if err != nil {
		return o, fmt.Errorf("checking listeners: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(c.proc(), e.Name(), "fd"))
		if errors.Is(err, fs.ErrPermission) {
			o.hidden[pid] = true
			continue
		}
		holds := false
		for _, fd := range fds { // none: a process that is gone
			link, _ := os.Readlink(filepath.Join(c.proc(), e.Name(), "fd", fd.Name()))
			if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
				o.held[strings.TrimSuffix(inode, "]")] = true
				holds = true
			}
		}
		if holds {
			o.pids = append(o.pids, pid)
		}
	}
	slices.Sort(o.pids)
	return o, nil
}

// checkOwnerProc is CheckOwner on Linux. A socket a readable process holds
// is judged by that process, as on macOS. A socket no readable process
// holds is the box's only when it belongs to this user and the VMM is one
// of this user's processes whose descriptors cannot be read (smolvm's
// `_boot-vm` sets PR_SET_DUMPABLE 0 before it opens the published ports);
// another user's socket, or this user's while the VMM is readable and does
// not hold it, is refused. Which of this user's unreadable processes holds
// the socket cannot be told; any of them runs with this user's rights
// already, the ones that could read the key hermes-box sends.
func (c Checker) checkOwnerProc(ctx context.Context, port, root int) error {
	o, err := c.ownersFromProc(port)
	if err != nil {
		return err
	}
	if len(o.sockets) == 0 {
		return fmt.Errorf("port %d: %w", port, ErrNoListener)
	}
	if err := c.checkPIDs(ctx, port, root, o.pids); err != nil {
		return err
	}
	me := c.uid()
	for _, s := range o.sockets {
		if o.held[s.inode] {
			continue
		}
		if s.uid != me {
			return fmt.Errorf("port %d is %w: a socket of uid %d (this user is uid %d) listens on it and is no process's this user can read; the box's VMM is %d",
				port, ErrForeignListener, s.uid, me, root)
		}
		// Only the VMM's uid is read (/proc/<pid>/status), not that of
		// every process hidden from this user.
		if !o.hidden[root] || !c.hasUID(root, me) {
			return fmt.Errorf("port %d is %w: a process of this user (uid %d) whose descriptors cannot be read listens on it; the box's VMM %d does not hold it",
				port, ErrForeignListener, me, root)
		}
	}
	return nil
}

// uid is the user hermes-box runs as (UID overrides it in tests).
func (c Checker) uid() int {
	if c.UID != nil {
		return *c.UID
	}
	return os.Geteuid()
}

// hasUID reports whether pid's effective uid is uid.
func (c Checker) hasUID(pid, uid int) bool {
	got, err := c.procUID(pid)
	return err == nil && got == uid
}

// procUID is pid's effective uid from /proc/<pid>/status, which stays
// readable when the process is not dumpable.
func (c Checker) procUID(pid int) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.proc(), strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) >= 2 {
				return strconv.Atoi(f[1])
			}
		}
	}
	return 0, fmt.Errorf("%s/%d/status: no Uid line", c.proc(), pid)
}

// listenSockets returns the sockets listening on port in the text of
// /proc/net/tcp or tcp6 (fields: sl, local, remote, st, tx:rx, tr:when,
// retrnsmt, uid, timeout, inode).
func listenSockets(b []byte, port int) ([]socket, error) {
	var out []socket
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if n == 1 || len(fields) < 10 || fields[3] != "0A" {
			continue
		}
		_, p, err := parseHexAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if p != port {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil || uid < 0 {
			return nil, fmt.Errorf("line %d: bad uid %q", n, fields[7])
		}
		if _, err := strconv.ParseUint(fields[9], 10, 64); err != nil {
			return nil, fmt.Errorf("line %d: bad inode %q", n, fields[9])
		}
		out = append(out, socket{inode: fields[9], uid: uid})
	}
	return out, sc.Err()
}
