package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/guest-agent/internal/secrets"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// secretsResult is what `secrets set` prints: names only.
type secretsResult = protocol.SecretsStored

func runSecrets(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "set" {
		return usageError("secrets: want set")
	}
	fs := newFlags(e, "secrets set", "")
	if err := parseFlags(fs, args[1:], 0); err != nil {
		return err
	}
	s, err := protocol.ReadSecrets(e.In)
	if err != nil {
		return fmt.Errorf("secrets set: %w", err)
	}
	tmpfs, err := secrets.EnsureTmpfs(e.root)
	if err != nil {
		return fmt.Errorf("secrets set: %w", err)
	}
	owner, err := passwd.Lookup(e.root, boxlayout.ServiceUser)
	if err != nil {
		return fmt.Errorf("secrets set: %w", err)
	}
	if err := secrets.Write(e.root, s, owner); err != nil {
		return fmt.Errorf("secrets set: %w", err)
	}
	res := secretsResult{Names: s.Names(), Tmpfs: tmpfs}
	// A running supervisor restarts the gateway so it starts with them;
	// without one (boot not running) the next start reads the file.
	if _, err := os.Stat(control.Socket(e.root)); err == nil {
		if _, err := control.Call(ctx, control.Socket(e.root), control.Request{Op: control.OpRestart, Name: boxlayout.HermesService}); err != nil {
			return fmt.Errorf("secrets set: restarting the gateway: %w", err)
		}
		res.GatewayRestarted = true
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("secrets set: %w", err)
	}
	_ = e.events.Emit(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelInfo,
		Message: fmt.Sprintf("%d secret(s) delivered", len(res.Names))})
	return json.NewEncoder(e.Out).Encode(res)
}
