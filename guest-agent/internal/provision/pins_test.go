package provision

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/pins"
)

func TestResolvePins(t *testing.T) {
	other := strings.Repeat("c", 64)
	tests := []struct {
		name    string
		arch    pins.Arch
		commit  string
		o       Overrides
		wantErr string
	}{
		{"arm64 is pinned", pins.ARM64, "", Overrides{}, ""},
		{"the 0.17.0 commit", pins.ARM64, "2bd1977d8fad185c9b4be47884f7e87f1add0ce3", Overrides{}, ""},
		{"unknown commit", pins.ARM64, strings.Repeat("0", 40), Overrides{}, "unsupported Hermes commit"},
		{"amd64 uv refuses", pins.AMD64, "", Overrides{}, "set HERMES_BOX_UV_SHA256=<sha256> in hermes-box.conf"},
		{"amd64 with the uv digest", pins.AMD64, "", Overrides{UVSHA256: other}, ""},
		{"amd64 codex is pinned", pins.AMD64, "", Overrides{UVSHA256: other, CodexSHA256: other}, "HERMES_BOX_CODEX_SHA256 may not change a pinned digest"},
		{"a pinned digest cannot be overridden", pins.ARM64, "", Overrides{UVSHA256: other}, "may not change a pinned digest"},
		{"other arch", "riscv64", "", Overrides{}, `unsupported guest architecture "riscv64"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ResolvePins(tt.arch, tt.commit, tt.o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := p.validate(); err != nil {
				t.Fatal(err)
			}
			if tt.arch == pins.AMD64 && (p.UV.SHA256 != other || p.CodexTarget != "x86_64-unknown-linux-musl" || !strings.Contains(p.UV.URL, "x86_64") ||
				p.Codex != (Artifact{URL: pins.Codex.URL(pins.AMD64), SHA256: pins.Codex.SHA256[pins.AMD64]})) {
				t.Errorf("amd64 pins %+v", p)
			}
		})
	}
	if _, err := ResolvePins(pins.AMD64, "", Overrides{}); !errors.Is(err, pins.ErrUnknownDigest) {
		t.Errorf("amd64 without digests: %v", err)
	}
}

func TestLoadTestPinsRefusesBadInput(t *testing.T) {
	prod, err := ResolvePins(pins.ARM64, "", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	good := strings.Repeat("d", 64)
	tests := []struct{ name, json, want string }{
		{"unknown field", `{"uvv":{}}`, `unknown field "uvv"`},
		{"plain http", `{"uv":{"url":"http://127.0.0.1/uv","sha256":"` + good + `"}}`, "field uv: url \"http://127.0.0.1/uv\" is not an https address"},
		{"short digest", `{"codex":{"url":"https://127.0.0.1/c","sha256":"abc"}}`, "field codex: sha256 \"abc\""},
		{"node dist without slash", `{"nodeDist":"https://127.0.0.1/dist"}`, "not an https directory address"},
		{"not json", `uv=1`, "test pins"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pins.json")
			if err := os.WriteFile(path, []byte(tt.json), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := LoadTestPins(path, prod)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
	checkProductionPins(t)
}

func TestPickNode(t *testing.T) {
	sum := strings.Repeat("a", 64)
	tests := []struct {
		name, sums string
		arch       pins.Arch
		want, err  string
	}{
		{"arm64 tar.gz", sum + "  node-v24.11.1-linux-arm64.tar.gz\n" + sum + "  node-v24.11.1-linux-arm64.tar.xz\n", pins.ARM64, "node-v24.11.1-linux-arm64.tar.gz", ""},
		{"x64", sum + "  node-v24.11.1-linux-x64.tar.gz\n", pins.AMD64, "node-v24.11.1-linux-x64.tar.gz", ""},
		{"other major only", sum + "  node-v22.1.0-linux-arm64.tar.gz\n", pins.ARM64, "", "lists no node-v24"},
		{"two matches", sum + "  node-v24.1.0-linux-arm64.tar.gz\n" + sum + "  node-v24.2.0-linux-arm64.tar.gz\n", pins.ARM64, "", "more than one"},
		{"bad digest", "xyz  node-v24.1.0-linux-arm64.tar.gz\n", pins.ARM64, "", "line 1: malformed digest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, got, err := PickNode([]byte(tt.sums), 24, tt.arch)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || name != tt.want || got != sum {
				t.Fatalf("got %q %q %v", name, got, err)
			}
		})
	}
}

func FuzzPickNode(f *testing.F) {
	f.Add([]byte(strings.Repeat("a", 64)+"  node-v24.1.0-linux-arm64.tar.gz\n"), true)
	f.Add([]byte("garbage\n\n  \t"), false)
	f.Fuzz(func(t *testing.T, sums []byte, arm bool) {
		arch := pins.AMD64
		if arm {
			arch = pins.ARM64
		}
		name, sum, err := PickNode(sums, 24, arch)
		if err != nil {
			return
		}
		if !sha256Hex.MatchString(sum) || !strings.HasPrefix(name, "node-v24.") || !strings.HasSuffix(name, ".tar.gz") || strings.ContainsAny(name, "/ ") {
			t.Fatalf("PickNode returned %q %q", name, sum)
		}
	})
}
