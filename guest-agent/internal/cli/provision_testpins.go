package cli

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// testPinsEnv names the environment variable of the test-only pins hook.
// It is empty — there is no hook — unless the binary is built with the
// hbxtest tag (provision_testpins_hbxtest.go) or is this package's test.
var testPinsEnv string

// applyTestPins honours the test-only pins hook when this binary has one
// (testPinsEnv is set): it swaps in stand-in artifacts and trusts the test
// server's CA. A release agent has no hook name, so nothing in its
// environment can switch this on.
func applyTestPins(e *env, p provision.Pins) (provision.Pins, provision.TestPins, *x509.CertPool, error) {
	if testPinsEnv == "" {
		return p, provision.TestPins{}, nil, nil
	}
	path := os.Getenv(testPinsEnv)
	if path == "" {
		return p, provision.TestPins{}, nil, nil
	}
	_ = e.events.Emit(protocol.Event{Type: protocol.EventWarning, Level: protocol.LevelWarn,
		Message: testPinsEnv + " is set: using test-only stand-in artifacts, not the production pins"})
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
