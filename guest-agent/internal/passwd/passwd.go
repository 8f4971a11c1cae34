// Package passwd looks accounts up in the passwd and group files under an
// injectable root, so the agent resolves a program's user, its groups and
// home the way the box sees them, without cgo and without touching the
// machine it runs on in tests.
package passwd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// User is one account with its supplementary groups (primary included).
type User struct {
	Name   string
	UID    uint32
	GID    uint32
	Home   string
	Groups []uint32
}

// ErrNoUser is returned when the account does not exist.
var ErrNoUser = errors.New("no such user")

// Lookup finds name in <root>/etc/passwd and its groups in <root>/etc/group.
func Lookup(root, name string) (User, error) {
	pw := filepath.Join(root, "etc/passwd")
	f, err := os.Open(pw)
	if err != nil {
		return User{}, fmt.Errorf("looking up user %q: %w", name, err)
	}
	defer f.Close()
	u, err := FindUser(f, pw, name)
	if err != nil {
		return User{}, err
	}
	gr := filepath.Join(root, "etc/group")
	g, err := os.Open(gr)
	if err != nil {
		return User{}, fmt.Errorf("looking up groups of %q: %w", name, err)
	}
	defer g.Close()
	if u.Groups, err = GroupsOf(g, gr, u.Name, u.GID); err != nil {
		return User{}, err
	}
	return u, nil
}

// FindUser reads passwd lines from r (named file in errors) and returns name.
func FindUser(r io.Reader, file, name string) (User, error) {
	var found *User
	err := eachLine(r, file, 7, func(f []string) error {
		if f[0] != name || found != nil {
			return nil
		}
		uid, err := parseID(f[2], "uid")
		if err != nil {
			return err
		}
		gid, err := parseID(f[3], "gid")
		if err != nil {
			return err
		}
		found = &User{Name: f[0], UID: uid, GID: gid, Home: f[5]}
		return nil
	})
	if err != nil {
		return User{}, err
	}
	if found == nil {
		return User{}, fmt.Errorf("%w %q in %s", ErrNoUser, name, file)
	}
	return *found, nil
}

// GroupsOf returns the primary gid and every group listing user as a
// member, sorted.
func GroupsOf(r io.Reader, file, user string, primary uint32) ([]uint32, error) {
	groups := []uint32{primary}
	err := eachLine(r, file, 4, func(f []string) error {
		if !slices.Contains(strings.Split(f[3], ","), user) {
			return nil
		}
		gid, err := parseID(f[2], "gid")
		if err != nil {
			return err
		}
		if !slices.Contains(groups, gid) {
			groups = append(groups, gid)
		}
		return nil
	})
	slices.Sort(groups)
	return groups, err
}

// eachLine calls fn with the colon-separated fields of every entry line;
// comments and blank lines are skipped, a malformed line is an error that
// names the file and line.
func eachLine(r io.Reader, file string, fields int, fn func([]string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != fields || f[0] == "" {
			return fmt.Errorf("%s:%d: want %d colon-separated fields, got %d", file, n, fields, len(f))
		}
		if err := fn(f); err != nil {
			return fmt.Errorf("%s:%d: %w", file, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	return nil
}

func parseID(s, what string) (uint32, error) {
	id, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a number", what, s)
	}
	return uint32(id), nil
}
