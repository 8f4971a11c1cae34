package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, c := range newRootCommand().Commands() {
		if c.Hidden {
			continue
		}
		if c.Short == "" || !strings.Contains(out, c.Name()) || !strings.Contains(out, c.Short) {
			t.Errorf("help does not list %q with its one-line help", c.Name())
		}
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errs := runCLI(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "hermes-box") {
			t.Errorf("%s: exit %d, %d bytes, %s", shell, code, len(out), errs)
		}
	}
	if code, _, _ := runCLI(t, "completion", "tcsh"); code == 0 {
		t.Error("an unknown shell was accepted")
	}
}

func TestGlobalFlagsAndErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"version", []string{"version"}, 0, ""},
		{"json logs", []string{"--log-format", "json", "version"}, 0, ""},
		{"bad log format", []string{"--log-format", "xml", "version"}, 2, `invalid --log-format "xml"`},
		{"bad log level", []string{"--log-level", "loud", "version"}, 2, `invalid --log-level "loud"`},
		{"quiet", []string{"--quiet", "version"}, 0, ""},
		{"quiet with debug", []string{"-q", "--debug", "version"}, 2, "invalid --quiet with --debug or --log-level"},
		{"quiet with a level", []string{"-q", "--log-level", "info", "version"}, 2, "invalid --quiet with --debug or --log-level"},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"extra args", []string{"version", "x"}, 2, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.err) {
				t.Fatalf("exit %d stderr %q; want %d and %q", code, errs, tt.code, tt.err)
			}
		})
	}
}
