package box

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// Test hook for provisioning without the internet (test builds only, see
// testhooks.go). hooks.agentPins names a host directory holding pins.json
// (the agent's test-only pin override: stand-in artifacts on a loopback
// server the test runs) and the files it refers to, such as the server's
// CA. init copies them into the builder and runs provision with the agent's
// own hook variable (hooks.guestPins) pointing at the copy. The production
// pins are never changed; the agent warns that the override is in use.
const (
	guestTestPinsFile  = boxlayout.TestPinsDir + "/pins.json"
	testPinsManifest   = "pins.json"
	maxTestPinsEntries = 32
)

// installTestPins copies the test pin directory into the builder and
// returns the agent's environment and a cleanup that removes the copy. It
// does nothing unless the hook is set.
func installTestPins(ctx context.Context, b *Box, name string) ([]string, func() error, error) {
	noop := func() error { return nil }
	if b.testPinsDir == "" {
		return nil, noop, nil
	}
	b.ui.Warn("%s is set: provisioning with test-only stand-in artifacts, not the production pins", hooks.agentPins)
	files, err := testPinFiles(b.testPinsDir)
	if err != nil {
		return nil, noop, err
	}
	if err := execOK(ctx, b, name, "/bin/mkdir", "-p", "-m", "0700", boxlayout.TestPinsDir); err != nil {
		return nil, noop, err
	}
	cleanup := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), b.timing.cleanupTimeout)
		defer cancel()
		return execOK(ctx, b, name, "/bin/rm", "-rf", boxlayout.TestPinsDir)
	}
	for _, f := range files {
		if err := b.vm.CopyIn(ctx, name, f, path.Join(boxlayout.TestPinsDir, filepath.Base(f))); err != nil {
			return nil, noop, fmt.Errorf("copying the test pins: %w", err)
		}
	}
	return []string{hooks.guestPins + "=" + guestTestPinsFile}, cleanup, nil
}

// testPinFiles lists the regular files of dir, which must hold pins.json.
func testPinFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hooks.agentPins, err)
	}
	var files []string
	found := false
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		found = found || e.Name() == testPinsManifest
		files = append(files, filepath.Join(dir, e.Name()))
	}
	if !found {
		return nil, fmt.Errorf("%s: %s holds no %s", hooks.agentPins, dir, testPinsManifest)
	}
	if len(files) > maxTestPinsEntries {
		return nil, fmt.Errorf("%s: %s holds %d files, more than %d", hooks.agentPins, dir, len(files), maxTestPinsEntries)
	}
	return files, nil
}

// provisionTransport is the smolvm-exec transport for provision: the verb
// runs directly (the agent does not allow it through the relay), with the
// test pins' environment when the hook is set.
func provisionTransport(b *Box, name string, env []string) *relay.Exec {
	tr := directRelay(b, name)
	tr.Env = env
	return tr
}
