package backup

import (
	"archive/tar"
	"strings"
	"testing"
)

// TestHeaderListerKeepsOnlyWhatItIsAsked: with WorkspaceNames as its
// filter a lister counts and checks every entry but keeps only the names
// CheckWorkspace reads (the two configuration files, the first of work/),
// and the check passes or fails on them as on the whole listing.
func TestHeaderListerKeepsOnlyWhatItIsAsked(t *testing.T) {
	names := []string{"./", "hermes-home/", "hermes-home/config.yaml", "codex-home/config.toml", "work/", "work/a", "work/b", "notes"}
	for _, drop := range []string{"", "hermes-home/config.yaml", "codex-home/config.toml", "work/"} {
		ls := Limits{}.HeaderLister()
		ls.Keep(WorkspaceNames())
		var all []string
		for _, n := range names {
			if n == drop || drop == "work/" && strings.HasPrefix(n, "work/") {
				continue
			}
			all = append(all, n)
			typ := byte(tar.TypeReg)
			if strings.HasSuffix(n, "/") {
				typ = tar.TypeDir
			}
			if err := ls.Add(&tar.Header{Name: n, Typeflag: typ, Mode: 0o644}); err != nil {
				t.Fatal(err)
			}
		}
		if ls.Entries() != int64(len(all)) || len(ls.Names()) > 3 {
			t.Fatalf("dropping %q: %d entries, kept %q", drop, ls.Entries(), ls.Names())
		}
		if got, want := CheckWorkspace(ls.Names(), false), CheckWorkspace(all, false); (got == nil) != (want == nil) || (drop == "") != (got == nil) {
			t.Fatalf("dropping %q: the kept names check as %v, the whole listing as %v", drop, got, want)
		}
	}
	// An unsafe name is refused though its name would not be kept.
	ls := Limits{}.HeaderLister()
	ls.Keep(func(string) bool { return false })
	if err := ls.Add(&tar.Header{Name: "../x", Typeflag: tar.TypeReg}); err == nil {
		t.Fatal("an unsafe name not kept was not refused")
	}
}
