package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

// agentName is the guest agent's file name; an exec of it gets the
// machine's root as its --root.
var agentName = path.Base(boxlayout.AgentPath)

// exec is `machine exec`: the command runs on this host with the machine's
// root standing in for the guest's file system. As in 1.0.4, stdin reaches
// the command only with -i, and --timeout ends it with status 124. Where the
// release's row lacks LargeExecStdin, -i runs as 1.0.4's single loops do
// (runSingleLoop). The command reaches only what the machine's egress floor
// lets through (guestNetwork).
func (f *fake) exec(in *smolvmcli.Invocation) int {
	r, err := f.readRecord(nameOr(in))
	if err != nil {
		return smolvmcli.Fail(os.Stderr, "%v", err)
	}
	if r.State != stateRunning {
		return smolvmcli.Fail(os.Stderr, "machine '%s' is not running", r.Name)
	}
	root := f.root(r.Name)
	argv := guestArgv(root, in.Trailing)
	ctx := context.Background()
	var cancel context.CancelFunc = func() {}
	if t := in.Value("timeout"); t != "" {
		d, _ := smolvmcli.ParseDuration(t)
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = root
	if w := in.Value("workdir"); w != "" {
		cmd.Dir = filepath.Join(root, w)
	}
	cmd.Env = append(os.Environ(), r.Env...)
	cmd.Env = append(cmd.Env, resolveSecrets(append(r.SecretEnv, in.Values["secret-env"]...))...)
	cmd.Env = append(cmd.Env, in.Values["env"]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := guestNetwork(cmd, r, argv); err != nil {
		return smolvmcli.Fail(os.Stderr, "%v", err)
	}
	var code int
	if in.Bools["interactive"] && !largeExecStdin() {
		code, err = runSingleLoop(ctx, cmd, os.Stdin, os.Stdout, os.Stderr, execSendTimeout)
	} else {
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if in.Bools["interactive"] {
			cmd.Stdin = os.Stdin
		}
		code, err = exitStatus(cmd.Run()), nil
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return smolvmcli.ExitTimeout
	case err != nil:
		return smolvmcli.Fail(os.Stderr, "%v", err)
	}
	return code
}

// readRecord loads a machine under the state lock.
func (f *fake) readRecord(name string) (*record, error) {
	unlock, err := f.lockDB()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return f.load(name)
}

// guestArgv maps the command into the machine's root: an absolute command
// path that exists in the root runs from there, and the agent gets the root
// as its --root; a command of the host (/bin/chmod) gets its absolute
// arguments mapped into the root instead, so it acts on the guest's files.
func guestArgv(root string, argv []string) []string {
	out := append([]string(nil), argv...)
	if filepath.IsAbs(out[0]) {
		if p := filepath.Join(root, out[0]); isFile(p) {
			out[0] = p
		}
	}
	if filepath.Base(out[0]) == agentName {
		return append([]string{out[0], "--root", root}, out[1:]...)
	}
	if !strings.HasPrefix(out[0], root+string(filepath.Separator)) {
		for i := 1; i < len(out); i++ {
			if filepath.IsAbs(out[i]) {
				out[i] = filepath.Join(root, out[i])
			}
		}
	}
	return out
}

func isFile(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular()
}

// resolveSecrets turns GUEST=HOST references into GUEST=<value of HOST>.
func resolveSecrets(refs []string) []string {
	var env []string
	for _, ref := range refs {
		guest, host, _ := strings.Cut(ref, "=")
		env = append(env, guest+"="+os.Getenv(host))
	}
	return env
}

// exitStatus is the status the guest command's end maps to.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return smolvmcli.Fail(os.Stderr, "%v", err)
}

// shell is `machine shell`: a shell in the machine's root.
func (f *fake) shell(in *smolvmcli.Invocation) int {
	r, err := f.readRecord(nameOr(in))
	if err != nil {
		return smolvmcli.Fail(os.Stderr, "%v", err)
	}
	if r.State != stateRunning {
		return smolvmcli.Fail(os.Stderr, "machine '%s' is not running", r.Name)
	}
	cmd := exec.Command("/bin/sh")
	cmd.Dir = f.root(r.Name)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return exitStatus(cmd.Run())
}
