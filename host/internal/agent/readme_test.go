package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/bounded"
)

// docs/limits.md's table of the agent verbs the host calls lies between these.
const (
	readmeBegin = "<!-- agent verbs: generated from host/internal/agent/verbs.go by TestREADMEVerbTable -->\n"
	readmeEnd   = "<!-- end of agent verbs -->\n"
)

// verbTable is docs/limits.md's table of Verbs.
func verbTable() string {
	var b strings.Builder
	b.WriteString("| verb | arguments | input | answer | stdout at most | stderr (events) at most | deadline | idle deadline |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, v := range Verbs {
		input, stdout, deadline, idle := "-", "-", "none (ends on Ctrl-C)", "-"
		if v.Stdin {
			input = "stdin"
		}
		if v.Stdout > 0 {
			stdout = bounded.Human(v.Stdout)
		}
		if !v.Follow() {
			deadline = shortDuration(v.Deadline)
		}
		if v.Idle > 0 {
			idle = shortDuration(v.Idle)
		}
		answer := v.Result
		if v.Stream {
			answer += " (streamed)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", v.Name(), orDash(strings.Join(v.Args, " ")), input, answer,
			stdout, bounded.Human(v.Stderr), deadline, idle)
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return "`" + s + "`"
}

// shortDuration is d as "30 s", "2 min", "12 h".
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return fmt.Sprintf("%d s", d/time.Second)
}

// TestREADMEVerbTable: the list of caps and deadlines in docs/limits.md
// (linked from the README) is the verb table. HBX_UPDATE_README=1 rewrites it.
func TestREADMEVerbTable(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "limits.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start, end := strings.Index(readme, readmeBegin), strings.Index(readme, readmeEnd)
	if start < 0 || end < start {
		t.Fatalf("docs/limits.md has no verb table between %q and %q", readmeBegin, readmeEnd)
	}
	got, want := readme[start+len(readmeBegin):end], verbTable()
	if got == want {
		return
	}
	if os.Getenv("HBX_UPDATE_README") == "1" {
		readme = readme[:start+len(readmeBegin)] + want + readme[end:]
		if err := os.WriteFile(path, []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/limits.md's verb table is not the table of host/internal/agent/verbs.go (HBX_UPDATE_README=1 rewrites it):\n%s", want)
}
