package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hostkeys"
)

func runHostkeys(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "hostkeys", "")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	keys, err := hostkeys.Ensure(e.root)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(e.Out).Encode(keys); err != nil {
		return fmt.Errorf("writing host keys: %w", err)
	}
	return nil
}
