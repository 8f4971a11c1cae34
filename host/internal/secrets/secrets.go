// Package secrets delivers the box's mapped secrets (secret-env.txt) at
// every start: each GUEST=HOST mapping is resolved from the host's
// environment and the values travel as one JSON document on the relay's
// stdin to the agent's `secrets set`, never in an argv, a log line, an
// event, a manifest or a file on the host. smolvm itself drops
// --secret-env on create --from, on every supported release.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Setter is the agent's `secrets set`; *agent.Client is one.
type Setter interface {
	SetSecrets(ctx context.Context, s protocol.Secrets) (protocol.SecretsStored, error)
}

// Resolve reads each mapping's host variable with lookup (os.LookupEnv).
// A variable that is unset or empty refuses the start: the error names
// every such variable and its guest name, never a value.
func Resolve(mappings []config.SecretMapping, lookup func(string) (string, bool)) (protocol.Secrets, error) {
	s := protocol.Secrets{Env: map[string]string{}}
	var errs []error
	for _, m := range mappings {
		if err := m.CheckHost(lookup); err != nil {
			errs = append(errs, err)
			continue
		}
		v, _ := lookup(m.Host)
		s.Env[m.Guest] = v
	}
	if err := errors.Join(errs...); err != nil {
		return protocol.Secrets{}, fmt.Errorf("refusing to start without the mapped secrets: %w", err)
	}
	if err := s.Validate(); err != nil {
		return protocol.Secrets{}, fmt.Errorf("secret-env.txt: %w", err)
	}
	return s, nil
}

// Deliver sends s to the agent's `secrets set`. The agent keeps them on
// tmpfs and restarts the Hermes gateway with them.
func Deliver(ctx context.Context, set Setter, s protocol.Secrets) error {
	r, err := set.SetSecrets(ctx, s)
	if err != nil {
		return fmt.Errorf("delivering secrets: %w", err)
	}
	if !slices.Equal(r.Names, s.Names()) {
		return fmt.Errorf("delivering secrets: the agent stored %d of %d variables", len(r.Names), len(s.Env))
	}
	return nil
}
