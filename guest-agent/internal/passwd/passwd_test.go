package passwd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const passwdFile = `root:x:0:0:root:/root:/bin/bash
# a comment

boxadmin:x:1001:1001::/home/boxadmin:/bin/bash
hermes:x:1002:1002::/home/hermes:/bin/bash
`

const groupFile = `root:x:0:
sudo:x:27:hermes,boxadmin
hermes:x:1002:
docker:x:999:hermes
boxadmin:x:1001:
`

func writeRoot(t *testing.T, pw, gr string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"etc/passwd": pw, "etc/group": gr} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLookup(t *testing.T) {
	root := writeRoot(t, passwdFile, groupFile)
	tests := []struct {
		name   string
		want   User
		errMsg string
	}{
		{"hermes", User{Name: "hermes", UID: 1002, GID: 1002, Home: "/home/hermes", Groups: []uint32{27, 999, 1002}}, ""},
		{"root", User{Name: "root", UID: 0, GID: 0, Home: "/root", Groups: []uint32{0}}, ""},
		{"nobody", User{}, `no such user "nobody"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Lookup(root, tt.name)
			if tt.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errMsg) || !errors.Is(err, ErrNoUser) {
					t.Fatalf("got %v, want %q", err, tt.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want.Name || got.UID != tt.want.UID || got.GID != tt.want.GID || got.Home != tt.want.Home || !slices.Equal(got.Groups, tt.want.Groups) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMalformedFilesNameTheLine(t *testing.T) {
	tests := []struct {
		name, pw, gr, want string
	}{
		{"short passwd line", "root:x:0:0\n", groupFile, "etc/passwd:1: want 7"},
		{"bad uid", "hermes:x:abc:1:::\n", groupFile, `etc/passwd:1: uid "abc" is not a number`},
		{"bad gid in group", passwdFile, "sudo:x:-1:hermes\n", `etc/group:1: gid "-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Lookup(writeRoot(t, tt.pw, tt.gr), "hermes")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func FuzzFindUser(f *testing.F) {
	f.Add(passwdFile, "hermes")
	f.Add("a:b:c:d:e:f:g\n::::::\n", "a")
	f.Fuzz(func(t *testing.T, body, name string) {
		u, err := FindUser(strings.NewReader(body), "passwd", name)
		if err == nil && u.Name != name {
			t.Fatalf("found %q for %q", u.Name, name)
		}
		_, _ = GroupsOf(strings.NewReader(body), "group", name, 0)
	})
}
