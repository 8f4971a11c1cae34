package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/config"
)

// TestExplainEveryClass runs one wrapped error of every class of
// errorClasses (and one of none) through explain: each gets its class's
// next step, a carried one is kept unless the class overrides it, and no
// class is left without a case here (the binary-level cases are in
// findings_test.go).
func TestExplainEveryClass(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("doing something: %w", err) }
	cases := map[string]error{
		"usage":              userr.Usage("bad"),
		"machine stopped":    wrap(fmt.Errorf("%w (its last answer: %w)", box.ErrMachineStopped, syscall.ECONNREFUSED)),
		"host key mismatch":  userr.WithHint(wrap(box.ErrHostKeyMismatch), "re-run it"),
		"key refused":        wrap(box.ErrKeyRefused),
		"connection refused": wrap(syscall.ECONNREFUSED),
		"smolvm missing":     wrap(&exec.Error{Name: "/opt/smolvm/bin/smolvm", Err: exec.ErrNotFound}),
		"program missing":    wrap(&exec.Error{Name: "dbus-launch", Err: exec.ErrNotFound}),
		"configuration":      wrap(&config.Error{File: "f", Line: 1, Msg: "bad"}),
		"no /dev/kvm":        wrap(&fs.PathError{Op: "open", Path: "/dev/kvm", Err: syscall.ENOENT}),
		"/dev/kvm denied":    wrap(&fs.PathError{Op: "open", Path: "/dev/kvm", Err: syscall.EACCES}),
		"permission":         wrap(fs.ErrPermission),
		"timeout":            wrap(context.DeadlineExceeded),
	}
	cmd := &cobra.Command{Use: "hermes-box"}
	for _, c := range errorClasses {
		err, ok := cases[c.name]
		if !ok {
			t.Errorf("class %q has no case", c.name)
			continue
		}
		cause, next := explain(cmd, err)
		if want := c.next(cmd, err); next != want || cause != c.cause {
			t.Errorf("%s: cause %q next %q, want %q %q", c.name, cause, next, c.cause, want)
		}
		delete(cases, c.name)
	}
	for name := range cases {
		t.Errorf("case %q is no class", name)
	}
	// A carried next step is kept by a class that does not override it.
	if _, next := explain(cmd, userr.WithHint(wrap(fs.ErrPermission), "chmod it")); next != "chmod it" {
		t.Errorf("the carried next step was replaced: %q", next)
	}
	// A missing keyring helper is not a missing smolvm: its next step names it.
	keyring := wrap(fmt.Errorf("opening the keyring: %w", &exec.Error{Name: "dbus-launch", Err: exec.ErrNotFound}))
	if cause, next := explain(cmd, keyring); strings.Contains(cause, "smolvm") || !strings.Contains(next, "install dbus-launch") {
		t.Errorf("a missing dbus-launch: %q %q", cause, next)
	}
	// An error of no class still gets one.
	if cause, next := explain(cmd, errors.New("something else")); cause != "" || next != fallbackNext(cmd) {
		t.Errorf("an unknown error: %q %q", cause, next)
	}
}
