package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/auditchain"
	"github.com/hermes-box/hermes-box/shared/auditchain/auditchaintest"
)

// chain builds a valid log of n entries the way the reviewer writes it.
func chain(n int) []string {
	entries := make([]auditchaintest.Entry, n)
	for i := range entries {
		entries[i] = auditchaintest.Entry{Command: fmt.Sprintf("ls %d", i+1), Decision: "approve", Risk: "low", Reason: "read only",
			Time: fmt.Sprintf("2026-01-01T00:00:0%dZ", (i+1)%10)}
	}
	return auditchaintest.Lines(entries...)
}

func join(lines []string) string { return strings.Join(lines, "\n") + "\n" }

func TestVerifyAcceptsAChain(t *testing.T) {
	recs, err := Verify(strings.NewReader(join(chain(5))))
	if err != nil || len(recs) != 5 || recs[4].Entry.Seq != 5 || recs[0].Entry.Prev != Genesis {
		t.Fatalf("got %d records, %v", len(recs), err)
	}
	if recs, err := Verify(strings.NewReader("")); err != nil || len(recs) != 0 {
		t.Fatalf("empty log: %v", err)
	}
}

func TestVerifyNamesTheTamperedLine(t *testing.T) {
	rehash := func(line, from, to string) string {
		body := strings.Replace(line[len(`{"entry":`):strings.LastIndex(line, `,"hash":`)], from, to, 1)
		sum := sha256.Sum256([]byte(body))
		return `{"entry":` + body + `,"hash":"` + hex.EncodeToString(sum[:]) + `"}`
	}
	tests := []struct {
		name   string
		edit   func(l []string) []string
		line   int
		reason string
	}{
		{"decision flipped", func(l []string) []string {
			l[2] = strings.Replace(l[2], `"decision":"approve"`, `"decision":"deny"`, 1)
			return l
		}, 3, "this line was altered"},
		{"rewritten with a fresh hash", func(l []string) []string { l[1] = rehash(l[1], "ls 2", "rm 2"); return l }, 3, "hash of line 2"},
		{"line removed", func(l []string) []string { return append(l[:1], l[2:]...) }, 2, "hash of line 1"},
		{"lines swapped", func(l []string) []string { l[3], l[4] = l[4], l[3]; return l }, 4, "hash of line 3"},
		{"garbage", func(l []string) []string { l[0] = "hello"; return l }, 1, "not an audit record"},
		{"extra field", func(l []string) []string { l[0] = rehash(l[0], `"seq":1`, `"seq":1,"x":1`); return l }, 1, "schema"},
		{"blank line", func(l []string) []string { return append(l[:2], append([]string{""}, l[2:]...)...) }, 3, "not an audit record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := Verify(strings.NewReader(join(tt.edit(chain(5)))))
			var ce *ChainError
			if !errors.As(err, &ce) || ce.Line != tt.line || !strings.Contains(ce.Reason, tt.reason) {
				t.Fatalf("got %v, want line %d: %s", err, tt.line, tt.reason)
			}
			if len(recs) != tt.line-1 {
				t.Fatalf("%d records before the break, want %d", len(recs), tt.line-1)
			}
		})
	}
}

func TestVerifyTornAndLongLines(t *testing.T) {
	torn := join(chain(2)) + `{"entry":{"seq":3`
	if _, err := Verify(strings.NewReader(torn)); err == nil || !strings.Contains(err.Error(), "line 3: incomplete") {
		t.Fatalf("torn: %v", err)
	}
	long := join(chain(1)) + strings.Repeat("x", auditchain.MaxLine+10) + "\n"
	if _, err := Verify(strings.NewReader(long)); err == nil || !strings.Contains(err.Error(), "line 2: line longer") {
		t.Fatalf("long: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	f.Add([]byte(join(chain(3))))
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := Verify(bytes.NewReader(b))
		var ce *ChainError
		if err != nil && (!errors.As(err, &ce) || ce.Line != len(recs)+1) {
			t.Fatalf("error %v after %d records", err, len(recs))
		}
	})
}

// TestPythonWriterAgrees writes a log with the real reviewer module and
// verifies it here: both sides must agree on the format byte for byte.
func TestPythonWriterAgrees(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required in CI")
		}
		t.Skip("python3 not installed")
	}
	log := filepath.Join(t.TempDir(), "logs", "gate-audit.jsonl")
	cmd := exec.CommandContext(t.Context(), python, "testdata/write_log.py", "../patch/gated_approval.py", log)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := Verify(bytes.NewReader(b))
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records: %v\n%s", len(recs), err, b)
	}
	e := recs[1].Entry
	if e.Decision != "escalate" || strings.Contains(e.Command, "abcdefgh1234") || recs[2].Entry.Command != "echo 'h\u00e9llo \u2603' > /tmp/x" {
		t.Fatalf("entries %+v", recs)
	}
	sum := sha256.Sum256([]byte("ls -la"))
	if recs[0].Entry.CommandSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatal("command digest differs")
	}
	tampered := bytes.Replace(b, []byte(`"decision":"deny"`), []byte(`"decision":"approve"`), 1)
	var ce *ChainError
	if _, err := Verify(bytes.NewReader(tampered)); !errors.As(err, &ce) || ce.Line != 3 {
		t.Fatalf("tampered line 3: %v", err)
	}
}
