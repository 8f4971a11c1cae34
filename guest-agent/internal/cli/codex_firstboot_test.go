package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// TestInstallCodexOnFirstBoot: boot's codex step, as the agent wires it,
// installs the package the image's pin names from an HTTPS server it
// trusts through the pin, seeds config.toml, and is skipped afterwards and
// on an image without a pin.
func TestInstallCodexOnFirstBoot(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root; the install chowns to hermes")
		}
		t.Skip("the install chowns to hermes (needs root)")
	}
	// Laid out as npm's @openai/codex@0.171.0-linux-x64 tarball.
	pkg := tartest.TarGz(t, []tartest.Entry{
		{Name: "package/package.json", Body: `{"name":"@openai/codex","version":"0.171.0-linux-x64"}`, Mode: 0o644},
		{Name: "package/vendor/x86_64-unknown-linux-musl/codex-package.json", Body: `{"version":"0.171.0","target":"x86_64-unknown-linux-musl","entrypoint":"bin/codex"}`, Mode: 0o644},
		{Name: "package/vendor/x86_64-unknown-linux-musl/bin/codex", Body: "#!/bin/sh\necho codex-cli 0.171.0\n", Mode: 0o755},
	})
	gets := 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets++
		w.Write(pkg)
	}))
	defer srv.Close()
	sum := sha256.Sum256(pkg)
	pin := provision.CodexPin{Version: "0.171.0", Target: "x86_64-unknown-linux-musl",
		Archive:   provision.Artifact{URL: srv.URL + "/codex-0.171.0-linux-x64.tgz", SHA256: hex.EncodeToString(sum[:])},
		TestCAPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))}
	root := t.TempDir()
	if msg, err := installCodex(t.Context(), root, nil); err == nil || !strings.Contains(err.Error(), "no Codex pin") {
		t.Fatalf("without a pin: %q, %v", msg, err)
	}
	b, _ := json.Marshal(pin)
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(boxlayout.CodexPinFile)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, boxlayout.CodexPinFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	msg, err := installCodex(t.Context(), root, nil)
	if err != nil || !strings.Contains(msg, "Codex 0.171.0-x86_64-unknown-linux-musl installed in /workspace/codex-home") {
		t.Fatalf("first boot: %q, %v", msg, err)
	}
	out, err := os.ReadFile(filepath.Join(root, boxlayout.CodexHome, "bin/codex"))
	if err != nil || !strings.Contains(string(out), "codex-cli 0.171.0") {
		t.Fatalf("bin/codex: %q, %v", out, err)
	}
	if fi, err := os.Stat(filepath.Join(root, boxlayout.CodexHome, "config.toml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config.toml: %v %v", fi, err)
	}
	if _, err := installCodex(t.Context(), root, nil); err == nil || !strings.Contains(err.Error(), "Codex is installed") || gets != 1 {
		t.Fatalf("second boot: %v after %d downloads", err, gets)
	}
}
