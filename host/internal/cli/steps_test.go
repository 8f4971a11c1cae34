package cli_test

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// numberedStep is one line of init's progress for a step of its plan:
// step n of m, started, done or failed.
type numberedStep struct {
	n, m        int
	name, state string
}

var (
	plainStep = regexp.MustCompile(`(?m)^(\d+)/(\d+) \[([a-z-]+)\] (started|done|failed)`)
	ttyStep   = regexp.MustCompile(`(•|✓|✗) \[(\d+)/(\d+)\] ([a-z-]+)`)
	ttyStates = map[string]string{"•": "started", "✓": "done", "✗": "failed"}
)

// plainSteps reads the numbered steps of init's plain text output.
func plainSteps(stderr string) []numberedStep {
	var out []numberedStep
	for _, m := range plainStep.FindAllStringSubmatch(stderr, -1) {
		n, _ := strconv.Atoi(m[1])
		of, _ := strconv.Atoi(m[2])
		out = append(out, numberedStep{n, of, m[3], m[4]})
	}
	return out
}

// ttySteps reads the numbered steps of a terminal recording.
func ttySteps(rec string) []numberedStep {
	var out []numberedStep
	for _, m := range ttyStep.FindAllStringSubmatch(rec, -1) {
		n, _ := strconv.Atoi(m[2])
		of, _ := strconv.Atoi(m[3])
		out = append(out, numberedStep{n, of, m[4], ttyStates[m[1]]})
	}
	return out
}

// jsonSteps reads the numbered step events of --log-format json.
func jsonSteps(t *testing.T, evs []event) []numberedStep {
	t.Helper()
	var out []numberedStep
	for _, ev := range evs {
		if ev.Type != "step" || ev.Fields["n"] == "" {
			continue
		}
		n, err1 := strconv.Atoi(ev.Fields["n"])
		of, err2 := strconv.Atoi(ev.Fields["of"])
		if err1 != nil || err2 != nil {
			t.Fatalf("step event with n %q of %q", ev.Fields["n"], ev.Fields["of"])
		}
		out = append(out, numberedStep{n, of, ev.Step, ev.State})
	}
	return out
}

// checkStepNumbers holds a successful init's numbered steps to their plan:
// one M throughout, each step started once in increasing order and ended
// before the next, no N above M, the last step M of M, and M done.
func checkStepNumbers(t testing.TB, what string, steps []numberedStep, wantM int) {
	t.Helper()
	if len(steps) == 0 {
		t.Fatalf("%s: no numbered step", what)
	}
	m := steps[0].m
	if wantM > 0 && m != wantM {
		t.Errorf("%s: %d steps planned, want %d", what, m, wantM)
	}
	open, done := 0, 0
	for _, s := range steps {
		switch {
		case s.m != m || s.n < 1 || s.n > m:
			t.Errorf("%s: step %d/%d %s (M is %d)", what, s.n, s.m, s.name, m)
		case s.state == "started" && (open != 0 || s.n <= done):
			t.Errorf("%s: %d/%d %s started while step %d is open or after step %d", what, s.n, m, s.name, open, done)
		case s.state == "started":
			open = s.n
		case s.n != open:
			t.Errorf("%s: %d/%d %s ended but step %d is open", what, s.n, m, s.name, open)
		default:
			open, done = 0, s.n
		}
	}
	if last := steps[len(steps)-1]; last.n != m || last.state != "done" || done != m {
		t.Errorf("%s: the last step is %d/%d %s %s, want %d/%d done", what, last.n, last.m, last.name, last.state, m, m)
	}
	count := 0
	for _, s := range steps {
		if s.state == "done" {
			count++
		}
	}
	if count != m {
		t.Errorf("%s: %d steps done, %d planned", what, count, m)
	}
}

// Item 5: init numbers its steps against the plan it knows up front, with
// the optional ones (a document, mapped secrets, which add a second health
// wait) counted: in JSON events (fields n and of) and in plain text.
func TestInitStepNumbers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Write("docs/SOUL.md", "be kind\n")
	h.Write("secret-env.txt", "OPENAI_API_KEY=HBX_TEST_STEP_SECRET\n")
	h.Extra = []string{"HBX_TEST_STEP_SECRET=sk-steps"}
	r := h.run("--log-format", "json", "init", "--document", filepath.Join(h.Root, "docs", "SOUL.md"))
	if r.code != 0 {
		t.Fatalf("init: %d\n%s", r.code, r.stderr)
	}
	evs := jsonEvents(t, r.stderr)
	steps := jsonSteps(t, evs)
	// 15 steps, a document, the secrets and the health wait after them.
	checkStepNumbers(t, "init --log-format json", steps, 18)
	var names []string
	for _, s := range steps {
		if s.state == "done" {
			names = append(names, s.name)
		}
	}
	if got := strings.Join(names, " "); !strings.HasSuffix(got, " hostkey document listener health secrets health") {
		t.Errorf("the numbered steps: %s", got)
	}
	if last := evs[len(evs)-1]; last.Step != "init" || last.Fields["steps"] != "18" || last.Fields["of"] != "18" || !strings.HasPrefix(last.Message, "init: 18 steps in ") {
		t.Errorf("init's summary: %+v", last)
	}
	mustRun(t, h, "stop")

	// Failing at provision: the steps stop short, and the summary says so.
	h = newHarness(t)
	h.Seed("provision-fail", "yes")
	r = h.run("init")
	if r.code != 3 || !strings.Contains(r.stderr, "7/15 [provision] failed (") || !regexpMatch(`init: 7 of 15 steps in \S+`, r.stderr) {
		t.Errorf("init failing at provision: %d\n%s", r.code, r.stderr)
	}
	for _, s := range plainSteps(r.stderr) {
		if s.n > s.m || s.m != 15 {
			t.Errorf("step %d/%d %s", s.n, s.m, s.name)
		}
	}
}
