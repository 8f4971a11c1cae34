package boot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// account is one login the box needs on every boot.
type account struct {
	name  string
	id    int
	home  string
	shell string
	// system accounts have no home of their own and no group named after them.
	system bool
	// password is the shadow state boot enforces: "" (deleted, key-only SSH),
	// "locked" ("!" prefix), or "any" (left alone).
	password string
}

// Accounts are the users boot recreates when missing, as the reference's
// start script does with useradd: boxadmin (the relay's login, no
// password), hermes (the service user, locked password) and sshd's
// privilege-separation user. Boot never execs useradd: it edits the
// account files itself, so the boot process runs nothing outside the
// supervisor.
var Accounts = []account{
	{name: boxlayout.AdminUser, id: boxlayout.AdminUID, home: "/home/" + boxlayout.AdminUser, shell: "/bin/bash", password: ""},
	{name: boxlayout.ServiceUser, id: boxlayout.ServiceUID, home: "/home/" + boxlayout.ServiceUser, shell: "/bin/bash", password: "locked"},
	{name: "sshd", id: -1, home: "/run/sshd", shell: "/usr/sbin/nologin", system: true, password: "any"},
}

// accountFiles are the three account databases under the root.
type accountFiles struct {
	passwd, group, shadow []byte
}

func readAccountFiles(o *Options) (accountFiles, error) {
	var a accountFiles
	var err error
	if a.passwd, err = os.ReadFile(o.path("etc/passwd")); err != nil {
		return a, err
	}
	if a.group, err = os.ReadFile(o.path("etc/group")); err != nil {
		return a, err
	}
	if a.shadow, err = os.ReadFile(o.path("etc/shadow")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return a, err
	}
	return a, nil
}

// accountsRepair recreates missing accounts and groups (and the messagebus
// group that dpkg's statoverride names), puts the password states back,
// and creates missing homes. Nothing changes when everything is in place.
func accountsRepair(_ context.Context, o *Options) (string, error) {
	a, err := readAccountFiles(o)
	if errors.Is(err, fs.ErrNotExist) {
		return "", skipped("no /etc/passwd or /etc/group under the root")
	}
	if err != nil {
		return "", err
	}
	before := a
	var did []string
	for _, acc := range Accounts {
		did = append(did, a.ensure(acc, o.Now())...)
	}
	if needsMessagebus(o) && !hasEntry(a.group, "messagebus") {
		a.group = appendLine(a.group, fmt.Sprintf("messagebus:x:%d:", freeID(a.group, 100, 999)))
		did = append(did, "group messagebus (dpkg statoverride)")
	}
	for _, f := range []struct {
		name      string
		old, data []byte
	}{{"etc/passwd", before.passwd, a.passwd}, {"etc/group", before.group, a.group}, {"etc/shadow", before.shadow, a.shadow}} {
		if bytes.Equal(f.old, f.data) {
			continue
		}
		if err := writeLike(o.path(f.name), f.data, 0o644); err != nil {
			return "", fmt.Errorf("writing /%s: %w", f.name, err)
		}
	}
	homes, err := ensureHomes(o)
	if err != nil {
		return "", err
	}
	did = append(did, homes...)
	if len(did) == 0 {
		return "", skipped("accounts boxadmin, hermes and sshd are in place")
	}
	return strings.Join(did, ", "), nil
}

// ensure adds acc's group, user and shadow entries where missing and
// enforces its password state; it returns what it changed.
func (a *accountFiles) ensure(acc account, now time.Time) []string {
	var did []string
	id := acc.id
	gid := id
	if acc.system {
		if u, ok := field(a.passwd, acc.name, 2); ok {
			id, _ = strconv.Atoi(u)
		} else {
			id = freeID(a.passwd, 100, 999)
		}
		gid = 65534 // nogroup, as useradd --system gives sshd on Debian
	} else if !hasEntry(a.group, acc.name) {
		a.group = appendLine(a.group, fmt.Sprintf("%s:x:%d:", acc.name, gid))
		did = append(did, "group "+acc.name)
	}
	if !hasEntry(a.passwd, acc.name) {
		a.passwd = appendLine(a.passwd, fmt.Sprintf("%s:x:%d:%d::%s:%s", acc.name, id, gid, acc.home, acc.shell))
		did = append(did, "user "+acc.name)
	}
	if a.shadow == nil {
		return did
	}
	days := strconv.FormatInt(now.Unix()/86400, 10)
	if !hasEntry(a.shadow, acc.name) {
		pw := "!"
		if acc.password == "" {
			pw = ""
		}
		a.shadow = appendLine(a.shadow, fmt.Sprintf("%s:%s:%s:0:99999:7:::", acc.name, pw, days))
		return append(did, "shadow "+acc.name)
	}
	cur, _ := field(a.shadow, acc.name, 1)
	want := cur
	switch acc.password {
	case "":
		want = ""
	case "locked":
		if !strings.HasPrefix(cur, "!") {
			want = "!" + cur
		}
	}
	if want != cur {
		a.shadow = setField(a.shadow, acc.name, 1, want)
		did = append(did, "password state of "+acc.name)
	}
	return did
}

// ensureHomes creates the homes of boxadmin and hermes when missing.
func ensureHomes(o *Options) ([]string, error) {
	var did []string
	for _, acc := range Accounts[:2] {
		p := o.path(acc.home)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.MkdirAll(p, 0o750); err != nil {
			return nil, err
		}
		u, err := passwd.Lookup(o.Root, acc.name)
		if err != nil {
			return nil, err
		}
		if err := os.Lchown(p, int(u.UID), int(u.GID)); err != nil {
			return nil, fmt.Errorf("chowning %s: %w", acc.home, err)
		}
		did = append(did, "home "+acc.home)
	}
	return did, nil
}

// needsMessagebus reports whether dpkg's statoverride names the messagebus
// group (D-Bus' helper), which apt then needs to exist.
func needsMessagebus(o *Options) bool {
	b, err := os.ReadFile(o.path("var/lib/dpkg/statoverride"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == "messagebus" {
			return true
		}
	}
	return false
}

func lines(b []byte) []string { return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") }

func hasEntry(b []byte, name string) bool {
	_, ok := field(b, name, 0)
	return ok
}

// field returns field i of name's entry in a colon-separated file.
func field(b []byte, name string, i int) (string, bool) {
	for _, l := range lines(b) {
		f := strings.Split(l, ":")
		if f[0] == name && len(f) > i {
			return f[i], true
		}
	}
	return "", false
}

func setField(b []byte, name string, i int, v string) []byte {
	ls := lines(b)
	for n, l := range ls {
		f := strings.Split(l, ":")
		if f[0] == name && len(f) > i {
			f[i] = v
			ls[n] = strings.Join(f, ":")
		}
	}
	return []byte(strings.Join(ls, "\n") + "\n")
}

func appendLine(b []byte, line string) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	return append(b, line+"\n"...)
}

// freeID returns the highest id in [lo, hi] not used by an entry's third
// field, as useradd --system and groupadd --system pick theirs.
func freeID(b []byte, lo, hi int) int {
	used := map[int]bool{}
	for _, l := range lines(b) {
		if f := strings.Split(l, ":"); len(f) > 2 {
			if n, err := strconv.Atoi(f[2]); err == nil {
				used[n] = true
			}
		}
	}
	for id := hi; id >= lo; id-- {
		if !used[id] {
			return id
		}
	}
	return hi
}

// writeLike replaces path atomically, keeping its mode and owner when it
// exists (shadow stays root:shadow 0640).
func writeLike(path string, data []byte, perm os.FileMode) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return atomicfile.Write(path, data, perm)
	}
	if err != nil {
		return err
	}
	return atomicfile.WriteLike(path, data, fi, fi.Mode().Perm())
}
