package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermestest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// hermesFixture copies a fixture tree for version (the gate package's
// excerpt for 0.19.0, the patch package's for 0.16/0.17) and adds that
// release's version and commit.
func hermesFixture(t *testing.T, version string) string {
	t.Helper()
	src := hermestest.PatchTree
	if version == "0.19.0" {
		src = hermestest.GateExcerpt(version)
	}
	dir := hermestest.CopyTree(t, src)
	rel, err := pins.HermesByVersion(version)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "pyproject.toml"), []byte("[project]\nversion = \""+rel.Version+"\"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, ".hermes-box-source"), []byte("commit="+rel.Commit+"\n"), 0o644))
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPatchCheckVerb(t *testing.T) {
	for _, tt := range []struct{ version, mechanism string }{{"0.16.0", "source-patch"}, {"0.19.0", "smart-plugin"}} {
		dir := hermesFixture(t, tt.version)
		code, out, errs := run(t, "", "patch", "--check", dir)
		if code != 0 || !strings.Contains(out, "Hermes "+tt.version) || !strings.Contains(out, "mechanism "+tt.mechanism+": accepted") {
			t.Fatalf("%s: exit %d\n%s%s", tt.version, code, out, errs)
		}
		aux := filepath.Join(dir, "agent", "auxiliary_client.py")
		must(t, os.Remove(aux))
		code, out, _ = run(t, "", "patch", "hermes", "--check", "--root", dir)
		if code != 1 || !strings.Contains(out, "DRIFT anchor Codex service tier forwarding") || !strings.Contains(out, "(file missing)") {
			t.Fatalf("%s: exit %d\n%s", tt.version, code, out)
		}
		code, out, _ = run(t, "", "patch", "--check", "--json", dir)
		var rep struct {
			Accepted  bool
			Mechanism string
		}
		if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Accepted || rep.Mechanism != tt.mechanism {
			t.Fatalf("%s: exit %d: %s", tt.version, code, out)
		}
	}
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "pyproject.toml"), []byte("[project]\nversion = \"0.18.2\"\n"), 0o644))
	code, out, errs := run(t, "", "patch", "--check", dir)
	if code != 1 || !strings.Contains(out, "Hermes 0.18.2: refused") || !strings.Contains(errs, "silently becomes manual") {
		t.Fatalf("0.18.2: exit %d\n%s%s", code, out, errs)
	}
}

func TestPatchHermesVerb(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required in CI")
		}
		t.Skip("python3 not installed")
	}
	root := t.TempDir()
	dir := hermesFixture(t, "0.16.0")
	v16, err := pins.HermesByVersion("0.16.0")
	must(t, err)
	config := filepath.Join(root, "workspace", "hermes-home", "config.yaml")
	must(t, os.MkdirAll(filepath.Dir(config), 0o755))
	must(t, os.WriteFile(config, []byte("# mine\nmodel: x\n"), 0o600))
	code, out, errs := run(t, "", "--root", root, "patch", "hermes", "--no-integration", "--commit", v16.Commit, "--root", dir)
	if code != 0 || !strings.Contains(out, "patched Hermes 0.16.0 with hermes-0.16.0") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	b, _ := os.ReadFile(config)
	if !strings.Contains(string(b), "# mine") || !strings.Contains(string(b), "mode: gated") {
		t.Fatalf("config not seeded:\n%s", b)
	}
	code, out, _ = run(t, "", "--root", root, "patch", "hermes", "--commit", v16.Commit, "--root", dir)
	if code != 0 || !strings.Contains(out, "already patched") {
		t.Fatalf("rerun exit %d: %s", code, out)
	}
	code, _, errs = run(t, "", "patch", "hermes", "--commit", pins.HermesReleases[2].Commit, "--root", hermesFixture(t, "0.16.0"))
	if code != 1 || !strings.Contains(errs, "refusing to patch") {
		t.Fatalf("wrong commit: exit %d: %s", code, errs)
	}
}

func TestSeedConfigVerb(t *testing.T) {
	root := t.TempDir()
	code, out, errs := run(t, "", "--root", root, "seed-config")
	if code == 0 || !strings.Contains(errs, "config.yaml") {
		t.Fatalf("seeded into a missing directory: %s %s", out, errs)
	}
	file := filepath.Join(root, "c.yaml")
	must(t, os.WriteFile(file, []byte("a: 1 # keep\n"), 0o600))
	if code, out, errs = run(t, "", "seed-config", "--file", file); code != 0 || !strings.Contains(out, "seeded") {
		t.Fatalf("exit %d %s %s", code, out, errs)
	}
	if code, out, _ = run(t, "", "seed-config", "--file", file); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("rerun exit %d %s", code, out)
	}
	must(t, os.WriteFile(file, []byte("- a\n"), 0o600))
	if code, _, errs = run(t, "", "seed-config", "--file", file); code != 1 || !strings.Contains(errs, "want a mapping") {
		t.Fatalf("list root: exit %d %s", code, errs)
	}
}

// writeChain writes n valid audit lines and returns the path.
func writeChain(t *testing.T, root string, n int) string {
	path := filepath.Join(root, "workspace", "hermes-home", "logs", "gate-audit.jsonl")
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	var b strings.Builder
	prev := strings.Repeat("0", 64)
	for i := 1; i <= n; i++ {
		body := fmt.Sprintf(`{"command":"ls %d","command_sha256":"%064x","confidence":0.9,"decision":"approve","prev":"%s","reason":"ok","risk":"low","seq":%d,"time":"t"}`, i, i, prev, i)
		sum := sha256.Sum256([]byte(body))
		prev = hex.EncodeToString(sum[:])
		b.WriteString(`{"entry":` + body + `,"hash":"` + prev + "\"}\n")
	}
	must(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

func TestAuditVerb(t *testing.T) {
	root := t.TempDir()
	if code, out, _ := run(t, "", "--root", root, "audit", "verify"); code != 0 || !strings.Contains(out, "0 entries") {
		t.Fatalf("absent log: exit %d %s", code, out)
	}
	path := writeChain(t, root, 4)
	code, out, errs := run(t, request("audit", "show", "--json"), "--root", root, "relay")
	var res struct {
		OK      bool
		Entries int
		Records []json.RawMessage
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.OK || res.Entries != 4 || len(res.Records) != 4 {
		t.Fatalf("show through the relay: exit %d %s %s", code, out, errs)
	}
	b, _ := os.ReadFile(path)
	must(t, os.WriteFile(path, []byte(strings.Replace(string(b), "ls 3", "rm 3", 1)), 0o600))
	code, out, errs = run(t, "", "--root", root, "audit", "verify")
	if code != 1 || !strings.Contains(out, "BROKEN at line 3") || !strings.Contains(errs, "line 3") {
		t.Fatalf("tampered: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = run(t, request("audit", "verify", "--json"), "--root", root, "relay")
	var broken struct {
		OK     bool
		Broken struct{ Line int }
	}
	if code != 1 || json.Unmarshal([]byte(out), &broken) != nil || broken.OK || broken.Broken.Line != 3 {
		t.Fatalf("verify --json: exit %d %s", code, out)
	}
	if code, _, _ := run(t, "", "audit", "frob"); code != 2 {
		t.Fatalf("bad subcommand exit %d", code)
	}
}

// TestAuditShowEscapes: a gated command carrying escapes is shown with them
// made visible; the JSON result keeps the exact command.
func TestAuditShowEscapes(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "workspace", "hermes-home", "logs", "gate-audit.jsonl")
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	body := fmt.Sprintf(`{"command":"echo \u001b]0;pwned\u0007","command_sha256":"%064x","confidence":0.9,"decision":"deny","prev":"%s","reason":"\u001b[1Aok","risk":"high","seq":1,"time":"t"}`, 1, strings.Repeat("0", 64))
	sum := sha256.Sum256([]byte(body))
	must(t, os.WriteFile(path, []byte(`{"entry":`+body+`,"hash":"`+hex.EncodeToString(sum[:])+"\"}\n"), 0o600))
	code, out, errs := run(t, "", "--root", root, "audit", "show")
	if code != 0 || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `echo \x1b]0;pwned\x07`) || !strings.Contains(out, `\x1b[1Aok`) {
		t.Fatalf("exit %d %q %s", code, out, errs)
	}
	code, out, _ = run(t, "", "--root", root, "audit", "show", "--json")
	if code != 0 || !strings.Contains(out, `echo \u001b]0;pwned\u0007`) {
		t.Fatalf("json: exit %d %s", code, out)
	}
}

// TestAuditRaw: the exact bytes of the log, for the host to verify; no log
// is no output.
func TestAuditRaw(t *testing.T) {
	root := t.TempDir()
	if code, out, errs := run(t, request("audit", "raw"), "--root", root, "relay"); code != 0 || out != "" {
		t.Fatalf("absent log: exit %d %q %s", code, out, errs)
	}
	path := writeChain(t, root, 3)
	want, _ := os.ReadFile(path)
	if code, out, errs := run(t, request("audit", "raw"), "--root", root, "relay"); code != 0 || out != string(want) {
		t.Fatalf("exit %d %q %s", code, out, errs)
	}
}

// TestPatchHermesVerb019 patches the 0.19.0 excerpt with the default pin:
// the container-backend and service-tier edits, the plugin in the tree's plugins/, the smart
// settings, also pinned in the managed scope under the root.
func TestPatchHermesVerb019(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required in CI")
		}
		t.Skip("python3 not installed")
	}
	root := t.TempDir()
	dir := hermesFixture(t, "0.19.0")
	code, out, errs := run(t, "", "--root", root, "patch", "hermes", "--root", dir)
	if code != 0 || !strings.Contains(out, "patched Hermes 0.19.0 with hermes-0.19.0: tools/approval.py, agent/auxiliary_client.py") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	home := filepath.Join(root, "workspace", "hermes-home")
	b, err := os.ReadFile(filepath.Join(home, "config.yaml"))
	if err != nil || !strings.Contains(string(b), "mode: smart") || !strings.Contains(string(b), "- hermes-box-gate") {
		t.Fatalf("config %v:\n%s", err, b)
	}
	for _, f := range []string{"__init__.py", "plugin.yaml", "gated_approval.py"} {
		if _, err := os.Stat(filepath.Join(dir, "plugins", "hermes-box-gate", f)); err != nil {
			t.Errorf("plugin: %v", err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc", "hermes", "config.yaml")); err != nil || !strings.Contains(string(b), "mode: smart") {
		t.Errorf("managed config %v:\n%s", err, b)
	}
}
