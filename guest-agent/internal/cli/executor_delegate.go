package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/hermes-box/hermes-box/guest-agent/internal/verbenv"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// The Executor helper (boxlayout.OCIHelperName) is installed beside the
// agent. The image pull (go-containerregistry) is kept out of the agent
// that answers every relay call and supervises the box, so the lean agent
// hands `executor` to the helper (guest-agent/cmd/hermes-box-agent-oci),
// whose main sets ExecutorInProcess.

// ExecutorInProcess runs the image subcommands of the executor verb in this
// process when set (by the helper's main, and by tests); nil hands them to
// the helper.
var ExecutorInProcess verbenv.Func

const executorDelegateSummary = "pull, activate, run or inspect the Executor (through " + boxlayout.OCIHelperName + "); connect-hermes, refresh-discovery"

// runExecutorDelegate runs connect-hermes and refresh-discovery itself and
// hands anything else to the helper with the same arguments: `run`
// replaces this process (the supervisor's pid becomes bun's), anything else
// runs as a child sharing stdin, stdout and stderr, whose exit status is
// passed on as is.
func runExecutorDelegate(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && isHelpFlag(args[0]) {
		fmt.Fprintf(e.Err, "usage: hermes-box-agent executor SUBCOMMAND ...\n  %s\n", executorDelegateSummary)
		return nil
	}
	if len(args) > 0 {
		if f, ok := executorHermesSubs[args[0]]; ok {
			return f(ctx, e, args[1:])
		}
	}
	if ExecutorInProcess != nil {
		return ExecutorInProcess(ctx, verbenv.Env{Root: e.root, Relayed: e.relayed, Events: e.events, Log: e.log,
			In: e.In, Out: e.Out, Err: e.Err}, args)
	}
	helper, err := ociHelperPath()
	if err != nil {
		return err
	}
	argv := append([]string{helper, "--root", e.root, "executor"}, args...)
	if len(args) > 0 && args[0] == "run" {
		if err := syscall.Exec(helper, argv, os.Environ()); err != nil {
			return fmt.Errorf("starting %s: %w", helper, err)
		}
	}
	cmd := exec.CommandContext(ctx, helper, argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.In, e.Out, e.Err
	err = cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return &exitError{code: exitErr.ExitCode(), err: err, quiet: true}
	}
	if err != nil {
		return fmt.Errorf("running %s: %w", helper, err)
	}
	return nil
}

// ociHelperPath finds the helper beside this executable.
func ociHelperPath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the agent's own path: %w", err)
	}
	helper := filepath.Join(filepath.Dir(self), boxlayout.OCIHelperName)
	if _, err := os.Stat(helper); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("the Executor needs %s beside the agent; this box was built without the Executor (set HERMES_BOX_EXECUTOR_ENABLED=true and run init)", helper)
	} else if err != nil {
		return "", fmt.Errorf("checking %s: %w", helper, err)
	}
	return helper, nil
}
