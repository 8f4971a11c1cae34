package cli

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
	"github.com/hermes-box/hermes-box/guest-agent/internal/download"
	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// installCodex installs Codex on the first boot (and on any boot that
// finds it missing) from the pin provisioning recorded in the image, into
// the workspace, verified by its digest, with config.toml's defaults when
// there is none (see provision.FirstBootSteps). Once installed it is the
// user's: `codex update` replaces it in place and no later boot touches it.
// It is boot's "codex" step (boot.Options.InstallCodex).
func installCodex(ctx context.Context, root string, fetcher provision.Fetcher) (string, error) {
	pin, err := provision.ReadCodexPin(root)
	if errors.Is(err, fs.ErrNotExist) {
		return "", boot.Skipped("no Codex pin in the image (" + boxlayout.CodexPinFile + ")")
	}
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, boxlayout.CodexHome, "bin/codex")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		if _, err := os.Lstat(filepath.Join(root, boxlayout.CodexHome, "config.toml")); err == nil {
			return "", boot.Skipped("Codex is installed in " + boxlayout.CodexHome)
		}
	}
	var roots *x509.CertPool
	if pin.TestCAPEM != "" {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(pin.TestCAPEM)) {
			return "", errors.New("codex pin: testCAPEM holds no certificate")
		}
	}
	var events eventLog
	cache := filepath.Join(root, boxlayout.DownloadCache)
	cfg := provision.Config{Root: root, Owner: provision.SystemOwner{}, Events: &events, Fetcher: fetcher}
	if cfg.Fetcher == nil {
		cfg.Fetcher = download.New(download.Options{CacheDir: cache, RootCAs: roots})
	}
	p, err := provision.NewFirstBoot(cfg, pin)
	if err != nil {
		return "", err
	}
	rep, err := p.Run(ctx)
	if err != nil {
		return "", fmt.Errorf("installing Codex %s-%s: %w", pin.Version, pin.Target, err)
	}
	_ = os.RemoveAll(cache)
	return fmt.Sprintf("Codex %s-%s installed in %s (%d changes; %s)", pin.Version, pin.Target, boxlayout.CodexHome, rep.Changed, events.summary()), nil
}

// eventLog keeps the first boot's provisioning messages for its log line.
type eventLog struct{ msgs []string }

func (l *eventLog) Emit(ev protocol.Event) error {
	if ev.Type == protocol.EventLog && ev.Message != "" {
		l.msgs = append(l.msgs, ev.Message)
	}
	return nil
}

func (l *eventLog) summary() string {
	if len(l.msgs) == 0 {
		return "nothing fetched"
	}
	return strings.Join(l.msgs, "; ")
}
