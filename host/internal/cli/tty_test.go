package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// runTTY runs hermes-box with args on a pseudo-terminal (script(1)) and
// returns what the terminal showed. With HBX_RECORD_DIR set the recording
// is also saved there as name.
func (h *harness) runTTY(name string, args ...string) (int, string) {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// script's pseudo-terminal has no size when its own stdin is not a
	// terminal: give it one, as a terminal window would.
	quoted := []string{"stty", "cols", "100", "rows", "40", "&&", "exec", shellQuote(bins.hermesBox)}
	for _, a := range args {
		quoted = append(quoted, shellQuote(a))
	}
	record := filepath.Join(h.T.TempDir(), name)
	cmd := exec.CommandContext(ctx, "script", "-q", "-e", "-c", strings.Join(quoted, " "), record)
	cmd.Env = append(append([]string(nil), h.Env...), h.Extra...)
	cmd.Env = append(cmd.Env, "TERM=xterm-256color", "COLUMNS=100", "LINES=40")
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.T.Fatalf("script: %v", err)
	}
	out := string(boxtest.ReadFile(h.T, record))
	if dir := os.Getenv("HBX_RECORD_DIR"); dir != "" {
		boxtest.Must(h.T, os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644))
	}
	return code, out
}

// needScript skips a test without script(1), except in CI, where it fails.
func needScript(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("script(1) (bsdutils) is required")
		}
		t.Skip("script(1) is not installed")
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Items 4, 5 on a terminal: init shows its steps numbered against its plan
// ("[3/15] builder-create") with their times and its total, snapshot its
// transfers with bytes, rate and ETA and the size.
func TestTTYRecordingOfInitAndSnapshot(t *testing.T) {
	t.Parallel()
	needScript(t)
	h := newHarness(t, v2Snapshots) // the bar of a v2 part, sized by the last backup
	code, out := h.runTTY("init.typescript", "init")
	if code != 0 {
		t.Fatalf("init on a terminal: %d\n%s", code, out)
	}
	for _, want := range []string{"• [3/15] builder-create: ", "✓ [3/15] builder-create (", "✓ [7/15] provision (", "  ✓ packages (",
		"✓ [15/15] health (", "init: 15 steps in ", "hermes-box is ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("init's recording lacks %q:\n%s", want, out)
		}
	}
	// Each step N of M, in order, the last M of M.
	checkStepNumbers(t, "init's recording", ttySteps(out), 15)
	// Twice: the second snapshot's ETA is based on the first's size.
	for _, name := range []string{"snapshot-1.typescript", "snapshot-2.typescript"} {
		code, out = h.runTTY(name, "snapshot")
		if code != 0 {
			t.Fatalf("snapshot on a terminal: %d\n%s", code, out)
		}
		for _, want := range []string{"• snapshot rootfs", "✓ snapshot rootfs: ", "/s", "backup hermes-box-"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, out)
			}
		}
	}
	// The second snapshot's bar is sized by the first backup ("~" total),
	// which is what the ETA is computed from. Whether a frame with the ETA
	// is drawn depends on the copy outlasting a redraw, so the ETA's text is
	// checked in the progress package's tests, with a fake clock.
	if !strings.Contains(out, "[") || !strings.Contains(out, " / ~") {
		t.Errorf("the second snapshot's recording shows no bar sized by the first backup:\n%s", out)
	}
	mustRun(t, h, "stop")
}

// TestTTYRecordingOfTheEscapeAgent records status, logs, stop and start on
// a pseudo-terminal (script(1)) against an agent that puts escape
// sequences in every field of its answers and events: the terminal gets
// the box's text only made visible, never a byte of the box's sequences.
func TestTTYRecordingOfTheEscapeAgent(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("script"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("script(1) (bsdutils) is required")
		}
		t.Skip("script(1) is not installed")
	}
	h := newHarness(t)
	initBox(t, h)
	for _, verb := range []string{"health", "logs", "services", "secrets", "netprobe"} {
		h.hostile(verb, "escape")
	}
	defer h.peaceful()
	shown := false
	for _, args := range [][]string{{"status"}, {"logs", "hermes"}, {"stop"}, {"start"}} {
		name := args[0] + ".typescript"
		_, out := h.runTTY(name, args...)
		// The payload's own sequences, raw: OSC 52, the title, the clear
		// screen, C1 CSI, the bidi override, a byte that is not UTF-8.
		for _, raw := range []string{"\x1b]52", "\x1b]0;", "\x1b[2J", "\x1b[H", "\u009b", "\x9b1m", "\u202e", "\xff"} {
			if strings.Contains(out, raw) {
				t.Errorf("%s: the box's %q reached the terminal:\n%q", name, raw, out)
			}
		}
		shown = shown || strings.Contains(out, `\x1b]52;c;`)
	}
	if !shown {
		t.Error("the box's text was not shown at all (made visible) in any recording")
	}
}
