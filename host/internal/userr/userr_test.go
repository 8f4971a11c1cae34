package userr

import (
	"errors"
	"fmt"
	"testing"
)

func TestHintAndCode(t *testing.T) {
	base := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		hint string
		code int
	}{
		{"plain", base, "", ExitFailure},
		{"hint", WithHint(base, "run x"), "run x", ExitFailure},
		{"wrapped hint", fmt.Errorf("op: %w", WithHint(base, "run y")), "run y", ExitFailure},
		{"usage", Usage("bad %s", "flag"), "", ExitUsage},
		{"code under hint", WithHint(WithCode(base, ExitStopped), "start it"), "start it", ExitStopped},
		{"agent status under a hint", WithHint(fmt.Errorf("provision: %w", exitErr(3)), "re-run"), "re-run", 3},
		{"not initialised", fmt.Errorf("ssh: %w", NotInitialised("no key")), "run hermes-box init first (or hermes-box restore BACKUP)", ExitNoBox},
	} {
		if got := Hint(tc.err); got != tc.hint {
			t.Errorf("%s: hint %q, want %q", tc.name, got, tc.hint)
		}
		if got := Code(tc.err); got != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, got, tc.code)
		}
	}
	if !errors.Is(NotInitialised("x"), ErrNoBox) {
		t.Error("NotInitialised must wrap ErrNoBox")
	}
	if WithHint(nil, "x") != nil || WithCode(nil, 2) != nil {
		t.Error("nil must stay nil")
	}
}

type exitErr int

func (e exitErr) Error() string { return "exit" }
func (e exitErr) ExitCode() int { return int(e) }
