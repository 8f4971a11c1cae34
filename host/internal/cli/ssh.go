package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

func newSSHCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ssh [-- COMMAND...]",
		Short: "Log in to the box (tmux), or run COMMAND there; its exit status is passed on",
		Long: "ssh runs the system ssh client with the project key and the pinned host key in a private\n" +
			"known_hosts, forwarding of every kind off. The box is started first if it is stopped.",
		RunE: sshAction,
	}
	// Everything after the first argument belongs to the remote command.
	cmd.Flags().SetInterspersed(false)
	return cmd
}

func sshAction(cmd *cobra.Command, args []string) error {
	a, err := newApp(cmd)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	m, err := a.machineState(ctx, a.cfg.MachineName)
	if err != nil {
		return err
	}
	if m.State != smolvm.StateRunning {
		if err := a.withLock(func() error { return a.startBox(ctx) }); err != nil {
			return err
		}
	}
	argv, err := a.sshArgv(args)
	if err != nil {
		return err
	}
	return a.runSSH(ctx, argv)
}

// sshArgv is the system ssh command line: no user configuration, only the
// project key, only the pinned host key, no agent and no forwarding.
func (a *app) sshArgv(remote []string) ([]string, error) {
	hostKey, err := keys.LoadHostKey(a.cfg.StateDir(), a.cfg.MachineName)
	if err != nil {
		return nil, fmt.Errorf("no pinned host key (run hermes-box init): %w", err)
	}
	kh := a.knownHostsPath()
	if err := keys.WriteKnownHosts(kh, "127.0.0.1", a.cfg.SSHPort, hostKey); err != nil {
		return nil, err
	}
	argv := []string{
		"-F", os.DevNull, "-i", a.cfg.SSHKeyPath(), "-p", strconv.Itoa(a.cfg.SSHPort),
		"-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "ForwardAgent=no",
		"-o", "ForwardX11=no", "-o", "ClearAllForwardings=yes", "-o", "PermitLocalCommand=no",
		"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + kh,
		"-o", "GlobalKnownHostsFile=" + os.DevNull, "-o", "HostKeyAlgorithms=" + hostKey.Type(),
		"-o", "SendEnv=COLORTERM", "-o", "SendEnv=TERM_PROGRAM", "-o", "SendEnv=TERM_PROGRAM_VERSION",
		a.sshUser + "@127.0.0.1",
	}
	if len(remote) > 0 {
		argv = append(argv, "--")
		argv = append(argv, remote...)
	}
	return argv, nil
}

// runSSH runs ssh with the terminal attached and passes its status on.
func (a *app) runSSH(ctx context.Context, argv []string) error {
	c := exec.CommandContext(ctx, "ssh", argv...)
	c.Stdin, c.Stdout, c.Stderr = a.stdin, a.stdout, a.stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			c.Env = append(c.Env, kv)
		}
	}
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return exitStatus(ee.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("running ssh: %w", err)
	}
	return nil
}
