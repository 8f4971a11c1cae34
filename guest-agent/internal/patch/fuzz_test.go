package patch

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzAnchorMatcher: Apply never panics, never changes its input, and either
// refuses (anchor not exactly once) or inserts exactly the hunk.
func FuzzAnchorMatcher(f *testing.F) {
	for _, name := range []string{approvalFile, gatewayFile, auxClientFile} {
		b, err := os.ReadFile(filepath.Join("testdata", "tree", filepath.FromSlash(name)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(""))
	set, err := SetByID("hermes-0.16.0")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		orig := bytes.Clone(src)
		for _, a := range set.Anchors {
			out, err := a.Apply(src)
			if !bytes.Equal(src, orig) {
				t.Fatal("input modified")
			}
			n := a.Count(src)
			if n != 1 {
				var ae *AnchorError
				if out != nil || !errors.As(err, &ae) || ae.Count != n || ae.Label != a.Label {
					t.Fatalf("count %d: got %v, %v", n, out != nil, err)
				}
				continue
			}
			if err != nil || len(out) != len(src)+len(a.Hunk) || !bytes.Contains(out, []byte(a.PatchedText())) {
				t.Fatalf("count 1: bad result (%v)", err)
			}
		}
	})
}

// FuzzPatchTree: whatever tools/approval.py holds, Patch either refuses
// with the tree untouched, or produces a marked tree that verifies.
func FuzzPatchTree(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "tree", "tools", "approval.py"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(append(bytes.Clone(b), b...))
	f.Add([]byte("# --- Phase 2.5: Smart approval (auxiliary LLM risk assessment) ---\n"))
	f.Fuzz(func(t *testing.T, approval []byte) {
		dir := fixtureTree(t, v16)
		if err := os.WriteFile(filepath.Join(dir, "tools", "approval.py"), approval, 0o644); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, dir)
		p := &Patcher{Runner: &fakeRunner{}}
		if _, err := p.Patch(context.Background(), dir, v16.Commit); err != nil {
			sameSnapshot(t, snapshot(t, dir), before)
			return
		}
		if _, err := os.Stat(filepath.Join(dir, MarkerFile)); errors.Is(err, fs.ErrNotExist) {
			t.Fatal("success without a marker")
		}
		if res, err := p.Patch(context.Background(), dir, v16.Commit); err != nil || !res.AlreadyPatched {
			t.Fatalf("patched tree does not verify: %v", err)
		}
	})
}
