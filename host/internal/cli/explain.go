package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// errorClass is one kind of error a user can meet. The command line
// recognises it however deep it is wrapped and gives it a plain cause (put
// before the raw message, which stays for whoever debugs it) and a next
// step. A class marked override replaces the next step the error carries:
// its own is known to be better (a usage error's hint is --help, a
// mismatched host key's is the re-pin verb, not the re-run its caller
// suggests).
type errorClass struct {
	name     string
	match    func(err error) bool
	cause    string
	next     func(cmd *cobra.Command, err error) string
	override bool
}

// errorClasses are the classes, most specific first. An error that matches
// none and carries no next step gets fallbackNext: no error ends without
// one (the table test in explain_test.go runs one error of each class
// through the binary).
var errorClasses = []errorClass{
	// A machine that stopped during a wait: its own message (the console's
	// tail) says why; a dial error inside it is only its last answer.
	{name: "machine stopped", match: func(err error) bool { return errors.Is(err, box.ErrMachineStopped) },
		next: func(*cobra.Command, error) string {
			return "hermes-box start tries again; hermes-box shell opens its root console"
		}},
	{name: "usage", match: func(err error) bool { return userr.Code(err) == userr.ExitUsage || isUsageError(err) },
		next: func(cmd *cobra.Command, _ error) string { return "see " + cmd.CommandPath() + " --help" }},
	{name: "host key mismatch", match: func(err error) bool { return errors.Is(err, box.ErrHostKeyMismatch) },
		cause:    "the box's SSH host key is not the one pinned when it was created",
		override: true,
		next: func(*cobra.Command, error) string {
			return "if the box was re-created or restored outside hermes-box, re-pin its key (read out of band, not over SSH): hermes-box hostkey repin"
		}},
	{name: "key refused", match: func(err error) bool { return errors.Is(err, box.ErrKeyRefused) },
		cause: "the box does not accept this project's SSH key",
		next: func(*cobra.Command, error) string {
			return "the box was made with another key: use that project's state/hermes-box-ed25519 (HERMES_BOX_SSH_KEY), or restore a backup of this project"
		}},
	{name: "connection refused", match: func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) },
		cause: "nothing answers on the box's published port (connection refused)",
		next: func(*cobra.Command, error) string {
			return "hermes-box status says whether the box runs; hermes-box restart brings its ports back"
		}},
	{name: "smolvm missing", match: func(err error) bool { return missingProgram(err) == "smolvm" },
		cause: "smolvm is not installed (or not on PATH)",
		next: func(*cobra.Command, error) string {
			return "install it: " + pins.SmolvmInstallCommand(pins.SmolvmRecommended) + "; check it with smolvm --version, then run the command again"
		}},
	// Another program run by name (the keyring's dbus-launch, OpenSSH's
	// ssh): named as the error names it, never taken for smolvm.
	{name: "program missing", match: func(err error) bool { return missingProgram(err) != "" },
		cause: "a program hermes-box runs is not installed (or not on PATH)",
		next: func(_ *cobra.Command, err error) string {
			return "install " + missingProgram(err) + " (the message above says what needs it), then run the command again"
		}},
	{name: "configuration", match: func(err error) bool { var ce *config.Error; return errors.As(err, &ce) },
		next: func(*cobra.Command, error) string {
			return "correct the setting named above (hermes-box.conf.example lists every setting and its values), then run the command again"
		}},
	// Before the general permission class: /dev/kvm's fixes are known.
	{name: "no /dev/kvm", match: func(err error) bool { return kvmError(err) != nil && errors.Is(kvmError(err), fs.ErrNotExist) },
		cause: "this Linux host has no /dev/kvm, which smolvm needs",
		next: func(*cobra.Command, error) string {
			return "load the KVM module (sudo modprobe kvm_intel, or kvm_amd; lsmod | grep kvm shows it), with virtualisation (VT-x/AMD-V) on in the firmware; " +
				"on a virtual machine, turn on nested virtualisation in its host (grep -cE 'vmx|svm' /proc/cpuinfo must not print 0); then run the command again"
		}},
	{name: "/dev/kvm denied", match: func(err error) bool { return kvmError(err) != nil },
		cause: "this user may not open /dev/kvm, which smolvm needs",
		next: func(*cobra.Command, error) string {
			return "add yourself to the kvm group (sudo usermod -aG kvm $USER), log in again (id -nG lists kvm then), and run the command again"
		}},
	{name: "permission", match: func(err error) bool { return errors.Is(err, fs.ErrPermission) },
		cause: "permission denied",
		next: func(*cobra.Command, error) string {
			return "the path named above must belong to you (ls -ld it); fix its owner or mode, then run the command again"
		}},
	{name: "timeout", match: func(err error) bool { return errors.Is(err, context.DeadlineExceeded) },
		cause: "timed out",
		next: func(cmd *cobra.Command, _ error) string {
			return "hermes-box status shows the box's state; hermes-box logs and hermes-box shell show why it is slow"
		}},
}

// kvmError is the error of opening /dev/kvm inside err (nil for none).
func kvmError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == "/dev/kvm" {
		return pe
	}
	return nil
}

// missingProgram is the name of the executable whose absence err reports,
// "" when it reports none.
func missingProgram(err error) string {
	var ee *exec.Error
	if errors.As(err, &ee) && errors.Is(ee.Err, exec.ErrNotFound) {
		return filepath.Base(ee.Name)
	}
	return ""
}

// fallbackNext is the next step of an error no class knows.
func fallbackNext(cmd *cobra.Command) string {
	return "hermes-box status shows the box's state; run " + cmd.CommandPath() + " again with --debug to see every step"
}

// explain returns the plain cause to put before err's message ("" when
// none) and the next step to print.
func explain(cmd *cobra.Command, err error) (cause, next string) {
	next = userr.Hint(err)
	for _, c := range errorClasses {
		if !c.match(err) {
			continue
		}
		if next == "" || c.override {
			next = c.next(cmd, err)
		}
		return c.cause, next
	}
	if next == "" {
		next = fallbackNext(cmd)
	}
	return "", next
}

// withCause puts cause before msg, unless msg already says it.
func withCause(cause, msg string) string {
	if cause == "" || strings.Contains(msg, cause) {
		return msg
	}
	return fmt.Sprintf("%s: %s", cause, msg)
}
