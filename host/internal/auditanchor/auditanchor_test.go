package auditanchor

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/auditchain/auditchaintest"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

// chain writes a valid log of the given decisions the way the reviewer does.
func chain(decisions ...string) string {
	return auditchaintest.Decisions("rm -rf /tmp/%d", "high", decisions...)
}

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// errBox is a stream error the box caused (its verb exiting 1).
var errBox = errors.New("agent exited with status 1")

func fromBoxErr(err error) bool { return errors.Is(err, errBox) }

// stream is log followed by end (nil: a clean end).
func stream(log string, end error) io.Reader {
	if end == nil {
		return strings.NewReader(log)
	}
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, log)
		pw.CloseWithError(end)
	}()
	return pr
}

func verify(t *testing.T, path string, r io.Reader) (Result, error) {
	t.Helper()
	return Verify(t.Context(), path, r, Options{Now: now, FromBox: fromBoxErr})
}

func TestAnchor(t *testing.T) {
	original := chain("deny", "approve", "deny")
	// padding is 17 MiB of valid records after the first three: past the
	// old 16 MiB bound on the log.
	long := make([]string, 0, 70_000)
	long = append(long, "deny", "approve", "deny")
	for len(long) < cap(long) {
		long = append(long, "approve")
	}
	padded := chain(long...)
	if len(padded) < 17<<20 {
		t.Fatalf("padded log of %d bytes", len(padded))
	}
	rewritten := chain("approve", "approve", "deny")
	tests := []struct {
		name string
		log  string
		end  error
		line int    // 0: the log extends the anchor
		want string // in the reason
	}{
		{"unchanged", original, nil, 0, ""},
		{"appended", chain("deny", "approve", "deny", "approve"), nil, 0, ""},
		{"appended past 16 MiB", padded, nil, 0, ""},
		// deny→approve on line 1, every hash after it recomputed: the
		// chain holds in the box, but not against the host's record.
		{"rewritten", rewritten, nil, 3, "rewritten"},
		{"rewritten, the agent then exits 1", rewritten, errBox, 3, "rewritten"},
		{"rewritten, the connection then fails", rewritten, errors.New("connection reset"), 3, "rewritten"},
		{"rewritten and padded past 16 MiB", rewritten + padded[len(original):], nil, 3, "rewritten"},
		{"rewritten later", chain("deny", "approve", "approve", "deny"), nil, 3, "rewritten"},
		{"truncated", chain("deny", "approve"), nil, 3, "truncated"},
		{"truncated, the agent then exits 1", chain("deny", "approve"), errBox, 3, "stream ended with"},
		{"truncated, the connection then fails", chain("deny", "approve"), errors.New("connection reset"), 3, "truncated"},
		{"emptied", "", nil, 1, "emptied"},
		{"emptied, the agent exits 1", "", errBox, 1, "emptied"},
		{"replaced", chain("approve"), nil, 2, "truncated"},
		{"edited without rehash", strings.Replace(original, `"decision":"deny"`, `"decision":"approve"`, 1), nil, 1, "altered"},
		{"a longer first line", strings.Replace(original, `"reason":"r"`, `"reason":"rr"`, 1), nil, 1, "altered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), filenames.AuditAnchor)
			if res, err := verify(t, path, strings.NewReader(original)); err != nil || !res.OK {
				t.Fatal(res, err)
			}
			res, err := verify(t, path, stream(tt.log, tt.end))
			if err != nil {
				t.Fatal(err)
			}
			a, lerr := Load(path)
			if lerr != nil {
				t.Fatal(lerr)
			}
			if tt.line == 0 {
				if !res.OK || a.Count != res.Count || a.Head != res.Head || a.Bytes != int64(len(tt.log)) {
					t.Fatalf("result %+v, anchor %+v: not advanced to the log", res, a)
				}
				return
			}
			if res.OK || res.Broken.Line != tt.line || !strings.Contains(res.Broken.Reason, tt.want) {
				t.Fatalf("got %+v, want line %d %q", res.Broken, tt.line, tt.want)
			}
			// The anchor is kept: the original still extends it.
			if a.Count != 3 {
				t.Fatalf("anchor moved to %d", a.Count)
			}
			if res, err := verify(t, path, strings.NewReader(original)); err != nil || !res.OK {
				t.Fatal(res, err)
			}
		})
	}
}

// TestUncheckable: a stream that fails before any byte, not by the box's
// doing, is no verdict: an error, the anchor kept.
func TestUncheckable(t *testing.T) {
	path := filepath.Join(t.TempDir(), filenames.AuditAnchor)
	if _, err := verify(t, path, strings.NewReader(chain("deny"))); err != nil {
		t.Fatal(err)
	}
	_, err := verify(t, path, stream("", context.DeadlineExceeded))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	// Past the anchored line, a failing stream is no verdict either: what
	// follows was not read whole.
	res, err := verify(t, path, stream(chain("deny", "approve"), errBox))
	if !errors.Is(err, errBox) || res.OK {
		t.Fatalf("got %+v, %v", res, err)
	}
	if a, _ := Load(path); a.Count != 1 {
		t.Fatalf("anchor moved to %d", a.Count)
	}
}

// TestRacingChecksNeverLower: two commands checking at once (a slow
// status that read 3 lines beside an audit that read 5) never leave the
// anchor lower than the longer log; whichever waits sees the log it read
// as short.
func TestRacingChecksNeverLower(t *testing.T) {
	three, five := chain("deny", "approve", "deny"), chain("deny", "approve", "deny", "approve", "deny")
	for i := range 10 {
		path := filepath.Join(t.TempDir(), filenames.AuditAnchor)
		var wg sync.WaitGroup
		for j, log := range []string{three, five} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pr, pw := io.Pipe()
				go func() {
					for _, line := range strings.SplitAfter(log, "\n") {
						if j == 0 {
							time.Sleep(10 * time.Millisecond) // the slow one
						}
						if _, err := io.WriteString(pw, line); err != nil {
							return
						}
					}
					pw.Close()
				}()
				if _, err := Verify(t.Context(), path, pr, Options{Now: now}); err != nil {
					t.Error(err)
				}
				pr.Close()
			}()
			time.Sleep(time.Duration(i%3) * time.Millisecond)
		}
		wg.Wait()
		if a, _ := Load(path); a.Count != 5 {
			t.Fatalf("round %d: the anchor moved back to %d", i, a.Count)
		}
	}
}

func TestLoadRefusesBadAnchor(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"bad json":     "{",
		"unknown":      `{"count":0,"hashes":[],"extra":1}`,
		"count wrong":  `{"count":2,"head":"a","hashes":["a"]}`,
		"no head":      `{"count":2,"bytes":10}`,
		"negative":     `{"count":-1}`,
		"bytes, no ln": `{"count":0,"bytes":3}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil {
			t.Fatalf("%s: loaded", name)
		}
	}
	if a, err := Load(filepath.Join(dir, "none")); err != nil || a.Count != 0 {
		t.Fatalf("missing: %+v %v", a, err)
	}
}

// TestOlderAnchorFormat: an anchor that lists every line's hash (the
// format before) is read, checked by its head, and written in the
// constant-size format at the next check.
func TestOlderAnchorFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), filenames.AuditAnchor)
	log := chain("deny", "approve")
	if _, err := verify(t, path, strings.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	a, _ := Load(path)
	old := `{"count":2,"head":"` + a.Head + `","hashes":["x","` + a.Head + `"],"time":"2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := verify(t, path, strings.NewReader(chain("approve", "approve")))
	if err != nil || res.OK || res.Broken.Line != 2 {
		t.Fatalf("rewrite against the older anchor: %+v %v", res.Broken, err)
	}
	if res, err := verify(t, path, strings.NewReader(log)); err != nil || !res.OK {
		t.Fatalf("%+v %v", res, err)
	}
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "hashes") {
		t.Fatalf("not rewritten: %s", b)
	}
	if got, _ := Load(path); got.Prefix == "" || got.Bytes != int64(len(log)) {
		t.Fatalf("anchor %+v", got)
	}
}

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, filenames.AuditAnchor)
	if _, err := verify(t, path, strings.NewReader(chain("deny", "approve", "deny"))); err != nil {
		t.Fatal(err)
	}
	older, _ := Load(path)
	if _, err := verify(t, path, strings.NewReader(chain("deny", "approve", "deny", "deny"))); err != nil {
		t.Fatal(err)
	}
	// Restore of an older backup installs its anchor, lower on purpose.
	if aside, err := Install(t.Context(), path, &older, now); err != nil || aside != "" {
		t.Fatal(aside, err)
	}
	if res, err := verify(t, path, strings.NewReader(chain("deny", "approve", "deny"))); err != nil || !res.OK {
		t.Fatalf("the older backup's log against its own anchor: %+v %v", res, err)
	}
	aside, err := Install(t.Context(), path, nil, now)
	if err != nil || !strings.HasPrefix(aside, path+".") {
		t.Fatal(aside, err)
	}
	if moved, _ := Load(aside); moved != older {
		t.Fatalf("moved aside %+v, want %+v", moved, older)
	}
	if a, _ := Load(path); a.Count != 0 {
		t.Fatalf("anchor %+v after moving it aside", a)
	}
	if again, err := Install(t.Context(), path, nil, now); err != nil || again != "" {
		t.Fatalf("nothing to move aside: %q %v", again, err)
	}
}

func TestVerifyResult(t *testing.T) {
	path := filepath.Join(t.TempDir(), filenames.AuditAnchor)
	res, err := Verify(t.Context(), path, strings.NewReader(chain("deny", "approve")), Options{Now: now, Keep: true})
	if err != nil || !res.OK || res.Count != 2 || res.Anchored != 0 || len(res.Records) != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	res, err = verify(t, path, strings.NewReader(chain("approve", "approve")))
	if err != nil || res.OK || res.Broken.Line != 2 || res.Anchored != 2 || res.Err() == nil || res.Records != nil {
		t.Fatalf("%+v %v", res, err)
	}
	var text, js strings.Builder
	res.WriteText(&text, true)
	res.WriteJSON(&js, true)
	if !strings.Contains(text.String(), "BROKEN at line 2") || !strings.Contains(js.String(), `"broken":{"line":2`) {
		t.Fatalf("text %q json %q", text.String(), js.String())
	}
}
