package box

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// ExitStatus is a status passed through unchanged (of `ssh CMD`, of the
// console); it prints nothing more.
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// ExitCode is the status.
func (e ExitStatus) ExitCode() int { return int(e) }

// Shell opens the out-of-band root console (smolvm machine shell) on the
// given streams; a non-zero status is an ExitStatus.
func Shell(ctx context.Context, b *Box, stdin io.Reader, stdout, stderr io.Writer) error {
	if _, err := machineState(ctx, b, b.cfg.MachineName); err != nil {
		return err
	}
	code, err := b.vm.Shell(ctx, b.cfg.MachineName, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	if code != 0 {
		return ExitStatus(code)
	}
	return nil
}

// SSH runs the system ssh client into the box (starting it first when it
// is stopped) with the terminal on the given streams, running remote when
// it is not empty; ssh's status is passed on as an ExitStatus.
func SSH(ctx context.Context, b *Box, remote []string, stdin io.Reader, stdout, stderr io.Writer) error {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if m.State != smolvm.StateRunning {
		if err := Start(ctx, b); err != nil {
			return err
		}
	}
	if err := checkPinnedKey(ctx, b); err != nil {
		return err
	}
	argv, err := sshArgv(b, remote)
	if err != nil {
		return err
	}
	return runSSH(ctx, argv, stdin, stdout, stderr)
}

// sshArgv is the system ssh command line: no user configuration, only the
// project key, only the pinned host key, no agent and no forwarding.
func sshArgv(b *Box, remote []string) ([]string, error) {
	hostKey, err := keys.LoadHostKey(b.cfg.StateDir(), b.cfg.MachineName)
	if err != nil {
		return nil, fmt.Errorf("no pinned host key (run hermes-box init): %w", err)
	}
	kh := knownHostsPath(b)
	if err := keys.WriteKnownHosts(kh, "127.0.0.1", b.cfg.SSHPort, hostKey); err != nil {
		return nil, err
	}
	argv := []string{
		"-F", os.DevNull, "-i", b.cfg.SSHKeyPath(), "-p", strconv.Itoa(b.cfg.SSHPort),
		"-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "ForwardAgent=no",
		"-o", "ForwardX11=no", "-o", "ClearAllForwardings=yes", "-o", "PermitLocalCommand=no",
		"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + kh,
		"-o", "GlobalKnownHostsFile=" + os.DevNull, "-o", "HostKeyAlgorithms=" + hostKey.Type(),
		"-o", "SendEnv=COLORTERM", "-o", "SendEnv=TERM_PROGRAM", "-o", "SendEnv=TERM_PROGRAM_VERSION",
		b.sshUser + "@127.0.0.1",
	}
	if len(remote) > 0 {
		argv = append(argv, "--")
		argv = append(argv, remote...)
	}
	return argv, nil
}

// runSSH runs ssh with the terminal attached and passes its status on.
func runSSH(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := exec.CommandContext(ctx, "ssh", argv...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			c.Env = append(c.Env, kv)
		}
	}
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ExitStatus(ee.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("running ssh: %w", err)
	}
	return nil
}

// Logs prints the last lines of service's log to w, following it when
// follow is set.
func Logs(ctx context.Context, b *Box, w io.Writer, service string, lines int, follow bool) error {
	m, err := machineState(ctx, b, b.cfg.MachineName)
	if err != nil {
		return err
	}
	if m.State != smolvm.StateRunning {
		return fmt.Errorf("%s is %s; start it with hermes-box start", m.Name, m.State)
	}
	return runningClient(b).Logs(ctx, w, service, lines, follow)
}
