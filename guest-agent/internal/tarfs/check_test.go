package tarfs

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
)

// Short names for tartest's entry builders.
type ent = tartest.Entry

var (
	file     = tartest.File
	dir      = tartest.Dir
	symlink  = tartest.Symlink
	hardlink = tartest.Hardlink
	special  = tartest.Special
	tarBytes = tartest.Tar
)

func TestRules(t *testing.T) {
	tests := []struct {
		name string
		ents []ent
		rule Rule
	}{
		{"accepted", []ent{dir("./app/"), file("app/a", "x"), symlink("app/l", "/etc"), hardlink("app/h", "app/a"), file("app/.wh.gone", "")}, ""},
		{"absolute", []ent{file("/etc/x", "")}, RuleAbsolute},
		{"dot-dot", []ent{file("a/../../x", "")}, RuleDotDot},
		{"through symlink", []ent{symlink("a", "/"), file("a/x", "")}, RuleThroughSymlink},
		{"hardlink escape", []ent{hardlink("h", "../x")}, RuleHardlinkEscape},
		{"hardlink missing", []ent{hardlink("h", "x")}, RuleHardlinkTarget},
		{"hardlink to a dir", []ent{dir("d/"), hardlink("h", "d")}, RuleHardlinkTarget},
		{"block", []ent{special("b", tar.TypeBlock)}, RuleDevice},
		{"fifo", []ent{special("f", tar.TypeFifo)}, RuleFifo},
		{"whiteout dot", []ent{file("a/.wh..", "")}, RuleWhiteout},
		{"root replaced by a file", []ent{file(".", "")}, RuleType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckLayer(bytes.NewReader(tarBytes(t, tt.ents)))
			var refused *RefusedError
			switch {
			case tt.rule == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.rule != "" && (!errors.As(err, &refused) || refused.Rule != tt.rule):
				t.Fatalf("got %v, want %q", err, tt.rule)
			}
		})
	}
}

func TestCheckerModelsReplacedSymlinks(t *testing.T) {
	tests := []struct {
		name   string
		layers [][]ent
		ok     bool
	}{
		{"symlink whited out in a later layer, then a dir", [][]ent{{symlink("app/l", "/")}, {file("app/.wh.l", ""), dir("app/l/"), file("app/l/f", "x")}}, true},
		{"symlink replaced by a dir in the same layer", [][]ent{{symlink("app/l", "/"), dir("app/l/"), file("app/l/f", "x")}}, true},
		{"opaque dir does not hide a same-layer symlink", [][]ent{{dir("app/"), symlink("app/l", "/"), file("app/.wh..wh..opq", ""), file("app/l/f", "x")}}, false},
		{"whiteout does not hide a same-layer symlink", [][]ent{{symlink("app/l", "/"), file("app/.wh.l", ""), file("app/l/f", "x")}}, false},
		{"dir replaced by a symlink", [][]ent{{dir("app/d/"), file("app/d/f", "x")}, {symlink("app/d", "/"), file("app/d/g", "x")}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChecker()
			var err error
			for _, l := range tt.layers {
				c.NextLayer()
				tr := tar.NewReader(bytes.NewReader(tarBytes(t, l)))
				for err == nil {
					var hdr *tar.Header
					if hdr, err = tr.Next(); err == nil {
						_, err = c.Check(hdr)
					}
				}
				if errors.Is(err, io.EOF) {
					err = nil
				} else {
					break
				}
			}
			if (err == nil) != tt.ok {
				t.Fatalf("got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// FuzzCheckLayer feeds arbitrary tar streams to the pre-check: it must never
// panic, and whatever it accepts has no absolute or ".." names, no device
// or fifo entries, hardlinks that stay inside the root, and no entry below
// a symlink or a hard link to one (a hard link to a symlink is a symlink).
func FuzzCheckLayer(f *testing.F) {
	f.Add(tarBytes(f, []ent{dir("app/"), file("app/a", "x"), symlink("app/l", "/"), hardlink("app/h", "app/a")}))
	for _, layer := range [][]ent{
		{file("/outside/evil", "x")}, {file("app/../../evil", "x")},
		{symlink("app/up", "../.."), file("app/up/evil", "x")}, {hardlink("app/hl", "../outside")},
		{special("app/tty", tar.TypeChar)}, {special("app/p", tar.TypeFifo)}, {file("app/.wh...", "")},
		{symlink("app/l", "/"), hardlink("app/h", "app/l"), file("app/h/evil", "x")},
		{symlink("app/l", "/"), hardlink("app/h", "app/l"), hardlink("app/h2", "app/h"), dir("app/h2/x/")},
	} {
		f.Add(tarBytes(f, layer))
	}
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if CheckLayer(bytes.NewReader(data)) != nil {
			return
		}
		tr := tar.NewReader(bytes.NewReader(data))
		links := map[string]bool{} // paths that are symlinks now
		for {
			hdr, err := tr.Next()
			if err != nil {
				return
			}
			parts, _ := CleanParts(hdr.Name)
			for i := 1; i < len(parts); i++ {
				if links[strings.Join(parts[:i], "/")] {
					t.Fatalf("accepted %q below the symlink %q", hdr.Name, strings.Join(parts[:i], "/"))
				}
			}
			if p := strings.Join(parts, "/"); len(parts) > 0 && !strings.HasPrefix(parts[len(parts)-1], ".wh.") {
				target, _ := CleanParts(hdr.Linkname)
				links[p] = hdr.Typeflag == tar.TypeSymlink || hdr.Typeflag == tar.TypeLink && links[strings.Join(target, "/")]
				if hdr.Typeflag != tar.TypeDir {
					for k := range links {
						if strings.HasPrefix(k, p+"/") {
							delete(links, k) // a non-directory replaced the tree
						}
					}
				}
			}
			for _, n := range []string{hdr.Name, hdr.Linkname} {
				if n == hdr.Linkname && hdr.Typeflag != tar.TypeLink {
					continue
				}
				if strings.HasPrefix(n, "/") || strings.Contains("/"+n+"/", "/../") {
					t.Fatalf("accepted unsafe name %q", n)
				}
			}
			switch hdr.Typeflag {
			case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
				t.Fatalf("accepted special file %q", hdr.Name)
			}
		}
	})
}

// FuzzEntryName checks the names Extract writes: after CleanParts and a
// strip, no name is absolute or climbs out with "..".
func FuzzEntryName(f *testing.F) {
	for _, s := range []string{"a/b", "./a/../b", "/abs", "a//b/", "..", "a/./b"} {
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, raw string, strip int) {
		if strip < 0 || strip > 4 {
			return
		}
		x := &extraction{opt: Options{Strip: strip}}
		parts, ok, err := x.clean(raw)
		if err != nil || !ok {
			return
		}
		for _, p := range parts {
			if p == "" || p == "." || p == ".." || strings.Contains(p, "/") {
				t.Fatalf("clean(%q, %d) = %q", raw, strip, parts)
			}
		}
	})
}
