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
