package auditanchor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/auditchain"
	"github.com/hermes-box/hermes-box/shared/auditchain/auditchaintest"
)

// chain writes a valid log of the given decisions the way the reviewer does.
func chain(decisions ...string) string {
	return auditchaintest.Decisions("rm -rf /tmp/%d", "high", decisions...)
}

func TestAnchor(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	original := chain("deny", "approve", "deny")
	tests := []struct {
		name string
		log  string
		line int    // 0: the log extends the anchor
		want string // in the reason
	}{
		{"unchanged", original, 0, ""},
		{"appended", chain("deny", "approve", "deny", "approve"), 0, ""},
		// deny→approve on line 1, every hash after it recomputed: the
		// chain holds in the box, but not against the host's record.
		{"rewritten", chain("approve", "approve", "deny"), 1, "rewritten"},
		{"rewritten later", chain("deny", "approve", "approve", "deny"), 3, "rewritten"},
		{"truncated", chain("deny", "approve"), 3, "truncated"},
		{"emptied", "", 1, "emptied"},
		{"replaced", chain("approve"), 1, "rewritten or replaced"},
		{"edited without rehash", strings.Replace(original, `"decision":"deny"`, `"decision":"approve"`, 1), 1, "altered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if _, err := Record(path, strings.NewReader(original), now); err != nil {
				t.Fatal(err)
			}
			recs, err := Record(path, strings.NewReader(tt.log), now.Add(time.Hour))
			var ce *auditchain.ChainError
			if tt.line == 0 {
				if err != nil {
					t.Fatal(err)
				}
				a, _ := Load(path)
				if a.Count != len(recs) || a.Head != recs[len(recs)-1].Hash {
					t.Fatalf("anchor %+v not advanced to %d records", a, len(recs))
				}
				return
			}
			if !errors.As(err, &ce) || ce.Line != tt.line || !strings.Contains(ce.Reason, tt.want) {
				t.Fatalf("got %v, want line %d %q", err, tt.line, tt.want)
			}
			// The anchor is kept: the original still extends it.
			a, _ := Load(path)
			if a.Count != 3 {
				t.Fatalf("anchor moved to %d", a.Count)
			}
			if _, err := Check(strings.NewReader(original), a); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadRefusesBadAnchor(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"bad json":    "{",
		"unknown":     `{"count":0,"hashes":[],"extra":1}`,
		"count wrong": `{"count":2,"head":"a","hashes":["a"]}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		os.WriteFile(p, []byte(content), 0o600)
		if _, err := Load(p); err == nil {
			t.Fatalf("%s: loaded", name)
		}
	}
	if a, err := Load(filepath.Join(dir, "none")); err != nil || a.Count != 0 {
		t.Fatalf("missing: %+v %v", a, err)
	}
}

func TestVerifyResult(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	now := time.Now()
	res, err := Verify(path, strings.NewReader(chain("deny", "approve")), now)
	if err != nil || !res.OK || res.Count != 2 || res.Anchored != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	res, err = Verify(path, strings.NewReader(chain("approve", "approve")), now)
	if err != nil || res.OK || res.Broken.Line != 1 || res.Anchored != 2 || res.Err() == nil {
		t.Fatalf("%+v %v", res, err)
	}
	var text, js strings.Builder
	res.WriteText(&text, true)
	res.WriteJSON(&js, true)
	if !strings.Contains(text.String(), "BROKEN at line 1") || !strings.Contains(js.String(), `"broken":{"line":1`) {
		t.Fatalf("text %q json %q", text.String(), js.String())
	}
}
