//go:build hbxtest

package cli

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// applyTestPins honours provision.TestPinsEnv, which only tests set: it
// swaps in stand-in artifacts and trusts the test server's CA.
func applyTestPins(e *env, p provision.Pins) (provision.Pins, provision.TestPins, *x509.CertPool, error) {
	path := os.Getenv(provision.TestPinsEnv)
	if path == "" {
		return p, provision.TestPins{}, nil, nil
	}
	_ = e.events.Emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn,
		Message: provision.TestPinsEnv + " is set: using test-only stand-in artifacts, not the production pins"})
	p, tp, err := provision.LoadTestPins(path, p)
	if err != nil || tp.CAFile == "" {
		return p, tp, nil, err
	}
	pem, err := os.ReadFile(tp.CAFile)
	if err != nil {
		return p, tp, nil, fmt.Errorf("test pins: reading caFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return p, tp, nil, errors.New("test pins: caFile holds no PEM certificate")
	}
	return p, tp, pool, nil
}
