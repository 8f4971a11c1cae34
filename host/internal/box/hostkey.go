package box

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// The SSH dial's errors the command line explains: a host key that is not
// the pinned one, and a box that refuses the project key.
var (
	ErrHostKeyMismatch = relay.ErrHostKeyMismatch
	ErrKeyRefused      = relay.ErrAuthRefused
)

// HostKeyChange is what `hostkey repin` found: the pinned key's
// fingerprint ("" when none was pinned) and the box's, read out of band.
type HostKeyChange struct {
	Old, New string
	Changed  bool // the pin was replaced
}

// RepinHostKey reads the box's SSH host key out of band (the agent's
// hostkeys verb through smolvm exec: no network, nothing an impostor on
// the loopback port can answer) and pins it when it differs from the pin
// and confirm agrees. A stopped box is started for the read and verified
// with the new pin afterwards.
func RepinHostKey(ctx context.Context, b *Box, confirm func(old, new string) (bool, error)) (HostKeyChange, error) {
	var ch HostKeyChange
	err := withLock(b, func() error {
		m, err := machineState(ctx, b, b.cfg.MachineName)
		if err != nil {
			return err
		}
		started := m.State != smolvm.StateRunning
		if started {
			done := b.ui.Step("start", m.Name+", to read its host key")
			err := b.vm.Start(ctx, m.Name)
			if err == nil {
				err = b.drv.waitExec(ctx, m.Name)
			}
			done(err)
			if err != nil {
				return err
			}
		}
		key, err := readHostKey(ctx, b, m.Name)
		if err != nil {
			return fmt.Errorf("reading the host key of %s out of band: %w", m.Name, err)
		}
		ch.New = keys.Fingerprint(key)
		if old, err := keys.LoadHostKey(b.cfg.StateDir(), m.Name); err == nil {
			ch.Old = keys.Fingerprint(old)
		}
		if ch.Old == ch.New {
			return nil
		}
		ok, err := confirm(ch.Old, ch.New)
		if err != nil || !ok {
			return err
		}
		if err := keys.SaveHostKey(b.cfg.StateDir(), m.Name, key); err != nil {
			return err
		}
		ch.Changed = true
		b.ui.Info("pinned %s %s (was %s)", key.Type(), ch.New, ch.Old)
		if started {
			return verifyRunning(ctx, b)
		}
		return nil
	})
	return ch, err
}

// checkPinnedKey dials the box's SSH with the pinned host key before the
// system ssh runs, so a mismatch is said with its way out (hostkey repin)
// instead of OpenSSH's advice about a known_hosts file hermes-box writes
// afresh every time. Any other dial error is left for ssh to report.
func checkPinnedKey(ctx context.Context, b *Box) error {
	tr, err := sshRelay(b)
	if err != nil {
		return err
	}
	c, err := tr.Dial(ctx)
	if errors.Is(err, relay.ErrHostKeyMismatch) {
		return err
	}
	if err == nil {
		c.Close()
	}
	return nil
}
