package hermesconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const userConfig = `# Hermes configuration (user edited)
model:
  default: gpt-5.5 # the main model
  provider: openai-codex

# Approvals: how dangerous commands are handled
approvals:
  mode: manual # manual | smart | off
  timeout: 60
  mcp_reload_confirm: true
  gate:
    model: my-own-model
    note: keep me

mcp_servers:
  executor:
    url: http://127.0.0.1:4788/mcp
    headers:
      Authorization: Bearer ${MCP_EXECUTOR_API_KEY}

terminal:
  backend: docker # container backends skip approvals
  docker_image: python:3.11

security: off
# trailing comment
`

func TestSeedKeepsUserKeysAndComments(t *testing.T) {
	out, err := Seed("config.yaml", []byte(userConfig))
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{
		"# Hermes configuration (user edited)", "# the main model", "# Approvals: how dangerous commands are handled",
		"# manual | smart | off", "# container backends skip approvals", "# trailing comment",
		"mcp_reload_confirm: true", "note: keep me", "docker_image: python:3.11",
		"Authorization: Bearer ${MCP_EXECUTOR_API_KEY}", "url: http://127.0.0.1:4788/mcp",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lost %q:\n%s", want, text)
		}
	}
	// Top-level order is kept.
	last := -1
	for _, key := range []string{"model:", "approvals:", "mcp_servers:", "terminal:", "security:"} {
		i := strings.Index(text, "\n"+key)
		if key == "model:" {
			i = strings.Index(text, key)
		}
		if i <= last {
			t.Fatalf("key %s out of order:\n%s", key, text)
		}
		last = i
	}
	var got struct {
		Approvals struct {
			Mode, CronMode string
			Timeout        int
			GatewayTimeout int `yaml:"gateway_timeout"`
			Gate           map[string]any
		}
		Security map[string]any
		Terminal map[string]any
		Model    map[string]any
	}
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	a := got.Approvals
	if a.Mode != "gated" || a.Timeout != 60 || a.GatewayTimeout != 300 || got.Terminal["backend"] != "local" {
		t.Fatalf("approvals %+v terminal %v", a, got.Terminal)
	}
	wantGate := map[string]any{"enabled": true, "provider": "openai-codex", "model": "gpt-5.5", "reasoning_effort": "low",
		"service_tier": "fast", "timeout": 30, "scope": "once", "min_confidence": 0.75, "max_context_chars": 12000,
		"auto_approve_max_risk": "medium", "escalate_on_error": true, "escalate_on_low_confidence": true, "note": "keep me"}
	for k, v := range wantGate {
		if a.Gate[k] != v {
			t.Errorf("gate.%s = %v, want %v", k, a.Gate[k], v)
		}
	}
	if got.Security["redact_secrets"] != true || got.Security["tirith_enabled"] != true {
		t.Errorf("security %v", got.Security)
	}
	if got.Model["default"] != "gpt-5.5" {
		t.Errorf("model %v", got.Model)
	}
	again, err := Seed("config.yaml", out)
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("re-run not byte-identical (%v):\n%s", err, again)
	}
}

func TestSeedEmptyAndCommentOnly(t *testing.T) {
	for _, in := range []string{"", "# only a comment\n"} {
		out, err := Seed("c.yaml", []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(out), strings.TrimSpace(in)) || !strings.Contains(string(out), "mode: gated") {
			t.Fatalf("got:\n%s", out)
		}
		if again, _ := Seed("c.yaml", out); !bytes.Equal(again, out) {
			t.Fatalf("re-run changed:\n%s", again)
		}
	}
}

func TestSeedRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"list root":     "- a\n- b\n",
		"scalar root":   "hello\n",
		"two documents": "a: 1\n---\nb: 2\n",
		"bad yaml":      "a: [1\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Seed("/x/config.yaml", []byte(in)); err == nil || !strings.Contains(err.Error(), "/x/config.yaml") {
				t.Fatalf("got %v, want an error naming the file", err)
			}
		})
	}
}

func TestSeedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(userConfig), 0o640); err != nil {
		t.Fatal(err)
	}
	if changed, err := SeedFile(path); err != nil || !changed {
		t.Fatalf("first run: %v %v", changed, err)
	}
	first, _ := os.ReadFile(path)
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if changed, err := SeedFile(path); err != nil || changed {
		t.Fatalf("second run: %v %v", changed, err)
	}
	if second, _ := os.ReadFile(path); !bytes.Equal(first, second) {
		t.Fatal("second run changed the file")
	}
	// A refused file is left alone.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("- x\n"), 0o600)
	if _, err := SeedFile(bad); err == nil {
		t.Fatal("list root accepted")
	}
	if b, _ := os.ReadFile(bad); string(b) != "- x\n" {
		t.Fatal("refused file changed")
	}
	// A missing file is created.
	fresh := filepath.Join(dir, "new.yaml")
	if changed, err := SeedFile(fresh); err != nil || !changed {
		t.Fatalf("missing file: %v %v", changed, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}

func FuzzSeed(f *testing.F) {
	f.Add([]byte(userConfig))
	f.Add([]byte("approvals: [1, 2]\n"))
	f.Add([]byte("a: &x {b: 1}\napprovals: *x\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4096 {
			return // keep each run short; the parser is not what is fuzzed here
		}
		out, err := Seed("f.yaml", in)
		if err != nil {
			return
		}
		again, err := Seed("f.yaml", out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent (%v):\n%q\n%q", err, out, again)
		}
	})
}
