//go:build !hbxtest

package cli

import (
	"crypto/x509"

	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
)

// applyTestPins: a release agent has no test hook; the production pins
// stand, whatever the environment holds.
func applyTestPins(_ *env, p provision.Pins) (provision.Pins, provision.TestPins, *x509.CertPool, error) {
	return p, provision.TestPins{}, nil, nil
}
