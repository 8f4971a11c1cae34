package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/download"
	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
)

func runProvision(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "provision", "[--dry-run] [--arch ARCH] [--authorized-keys FILE] [--hermes-commit SHA] [--uv-sha256 HEX] [--codex-sha256 HEX]")
	dryRun := fs.Bool("dry-run", false, "only list what would change")
	arch := fs.String("arch", runtime.GOARCH, "guest architecture (arm64 is pinned; amd64 needs the uv digest below)")
	keys := fs.String("authorized-keys", "", "file with boxadmin's SSH public key")
	commit := fs.String("hermes-commit", pins.DefaultHermesCommit, "Hermes commit to install (must be in shared/pins)")
	uvSum := fs.String("uv-sha256", "", "HERMES_BOX_UV_SHA256 from hermes-box.conf, for an architecture without a pinned uv digest")
	codexSum := fs.String("codex-sha256", "", "HERMES_BOX_CODEX_SHA256 from hermes-box.conf, for an architecture without a pinned Codex digest")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	p, err := provision.ResolvePins(pins.Arch(*arch), *commit, provision.Overrides{UVSHA256: *uvSum, CodexSHA256: *codexSum})
	if err != nil {
		return err
	}
	p, tp, roots, err := applyTestPins(e, p)
	if err != nil {
		return err
	}
	cfg := provision.Config{
		Root: e.root, Pins: p, Runner: command.ExecRunner{}, Owner: provision.SystemOwner{}, Events: e.events,
		Fetcher: download.New(download.Options{CacheDir: filepath.Join(e.root, boxlayout.DownloadCache), RootCAs: roots}),
		Gate:    newGatePatcher(),
	}
	if tp.CAFile != "" {
		// Recorded with the Codex pin: the first boot fetches from the
		// same test server.
		if cfg.TestCAPEM, err = os.ReadFile(tp.CAFile); err != nil {
			return fmt.Errorf("test pins: reading caFile: %w", err)
		}
	}
	if *keys != "" {
		if cfg.AuthorizedKeys, err = os.ReadFile(*keys); err != nil {
			return fmt.Errorf("reading authorized keys: %w", err)
		}
	}
	prov, err := provision.New(cfg)
	if err != nil {
		return err
	}
	var rep provision.Report
	if *dryRun {
		rep, err = prov.Plan(ctx)
	} else {
		rep, err = prov.Run(ctx)
	}
	if encErr := writeJSON(e.Out, rep); encErr != nil && err == nil {
		err = encErr
	}
	return err
}
