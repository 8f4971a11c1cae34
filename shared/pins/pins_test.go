package pins

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestTableIsWellFormed(t *testing.T) {
	if HermesReleases[0].Commit != DefaultHermesCommit {
		t.Errorf("the default Hermes commit must come first")
	}
	for _, h := range HermesReleases {
		if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(h.Commit) || !hex64.MatchString(h.InstallerSHA256) || h.AnchorSet == "" ||
			(h.Mechanism != GateSourcePatch && h.Mechanism != GateSmartPlugin) || h.PythonVersion == "" {
			t.Errorf("malformed Hermes pin %+v", h)
		}
		if !strings.HasPrefix(h.InstallerURL(), "https://") || !strings.Contains(h.InstallerURL(), h.Commit) {
			t.Errorf("installer URL %q is not immutable https", h.InstallerURL())
		}
	}
	for _, a := range []Artifact{UV, Codex} {
		for arch, d := range a.SHA256 {
			if !hex64.MatchString(d) {
				t.Errorf("%s %s: malformed digest %q", a.Name, arch, d)
			}
		}
		for arch, u := range a.URLs {
			if !strings.HasPrefix(u, "https://") || !strings.Contains(u, a.Version) {
				t.Errorf("%s %s: URL %q is not a pinned https address", a.Name, arch, u)
			}
		}
		if _, ok := a.SHA256[SupportedGuestArch]; !ok {
			t.Errorf("%s has no digest for the supported guest arch", a.Name)
		}
	}
	if ExecutorImages[0].Reference != DefaultExecutorImage {
		t.Errorf("the default Executor image must come first")
	}
	for _, im := range ExecutorImages {
		if !regexp.MustCompile(`:` + regexp.QuoteMeta(im.Version) + `@sha256:[0-9a-f]{64}$`).MatchString(im.Reference) {
			t.Errorf("Executor reference %q lacks its tag or digest", im.Reference)
		}
		if (im.Layout != "packaged" && im.Layout != "workspace") || im.Source == "" {
			t.Errorf("Executor image %s: layout %q, source %q; every row names both", im.Version, im.Layout, im.Source)
		}
	}
}

func TestHermes(t *testing.T) {
	h, err := Hermes("2bd1977d8fad185c9b4be47884f7e87f1add0ce3")
	if err != nil || h.Version != "0.17.0" {
		t.Fatalf("got %+v, %v", h, err)
	}
	if _, err := Hermes(strings.Repeat("0", 40)); !errors.Is(err, ErrUnsupportedCommit) {
		t.Fatalf("unknown commit: got %v", err)
	}
}

func TestDigest(t *testing.T) {
	other := strings.Repeat("a", 64)
	tests := []struct {
		name     string
		arch     Arch
		override string
		want     string
		wantErr  string
	}{
		{"pinned", ARM64, "", UV.SHA256[ARM64], ""},
		{"pinned, same override", ARM64, UV.SHA256[ARM64], UV.SHA256[ARM64], ""},
		{"pinned, other override refused", ARM64, other, "", "may not change a pinned digest"},
		{"unknown refuses and says how", AMD64, "", "", "set HERMES_BOX_UV_SHA256=<sha256> in hermes-box.conf"},
		{"unknown with override", AMD64, other, other, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UV.Digest(tt.arch, tt.override)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := UV.Digest(AMD64, ""); !errors.Is(err, ErrUnknownDigest) || !strings.Contains(err.Error(), UV.URL(AMD64)) {
		t.Fatalf("uv amd64: got %v", err)
	}
	// HERMES_BOX_CODEX_SHA256 keeps its rule: it may repeat a pinned digest,
	// never change it.
	if _, err := Codex.Digest(AMD64, other); err == nil || !strings.Contains(err.Error(), "HERMES_BOX_CODEX_SHA256 may not change a pinned digest") {
		t.Fatalf("codex amd64 with another digest: got %v", err)
	}
}

func TestHermesByVersion(t *testing.T) {
	tests := []struct {
		version string
		want    GateMechanism
		err     error
		errText string
	}{
		{version: "0.19.0", want: GateSmartPlugin},
		{version: "0.16.0", want: GateSourcePatch},
		{version: "0.17.0", want: GateSourcePatch},
		{version: "0.18.2", err: ErrRefusedRelease, errText: `silently becomes manual`},
		{version: "0.18.0", err: ErrRefusedRelease, errText: "Hermes 0.18.0"},
		{version: "0.20.1", err: ErrRefusedRelease, errText: "Hermes 0.20.1: the approval code was reorganised after 0.19"},
		{version: "0.21.3", err: ErrRefusedRelease, errText: "Hermes 0.21.3: from 0.21 tools/approval.py was split into approval_smart.py"},
		{version: "0.22.0", err: ErrRefusedRelease, errText: "no byte-exact tree of this line has been verified"},
		{version: "0.23.0", err: ErrUnsupportedCommit, errText: "0.19.0"},
		{version: "0.2.1", err: ErrUnsupportedCommit, errText: "0.19.0"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			h, err := HermesByVersion(tt.version)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v, want %v containing %q", err, tt.err, tt.errText)
				}
				if tt.err == ErrRefusedRelease && !strings.Contains(err.Error(), "pin a supported release instead with HERMES_BOX_HERMES_COMMIT: "+DefaultHermesCommit+" (0.19.0)") {
					t.Fatalf("err = %v names nothing to pin instead", err)
				}
				return
			}
			if err != nil || h.Mechanism != tt.want || h.Version != tt.version {
				t.Fatalf("got %+v, %v", h, err)
			}
		})
	}
	if m := GateSmartPlugin.IntendedMode(); m != "smart" {
		t.Errorf("smart-plugin intends %q", m)
	}
	if m := GateSourcePatch.IntendedMode(); m != "gated" {
		t.Errorf("source-patch intends %q", m)
	}
}

// TestCodexIsPinnedFromNpmForEveryArch: Codex downloads npm's platform
// tarball of its version on both guest architectures, each with a SHA-256
// (none is left to HERMES_BOX_CODEX_SHA256) and the registry's sha512
// integrity it was checked against, and the pin names that source.
func TestCodexIsPinnedFromNpmForEveryArch(t *testing.T) {
	tests := []struct {
		arch    Arch
		npmArch string
		target  string
	}{
		{ARM64, "arm64", "aarch64-unknown-linux-musl"},
		{AMD64, "x64", "x86_64-unknown-linux-musl"},
	}
	for _, tt := range tests {
		t.Run(string(tt.arch), func(t *testing.T) {
			want := "https://registry.npmjs.org/@openai/codex/-/codex-" + Codex.Version + "-linux-" + tt.npmArch + ".tgz"
			if got := Codex.URL(tt.arch); got != want {
				t.Errorf("URL %q, want %q", got, want)
			}
			d, err := Codex.Digest(tt.arch, "")
			if err != nil || !hex64.MatchString(d) || d != Codex.SHA256[tt.arch] {
				t.Errorf("digest without an override: %q, %v; want the pinned SHA-256", d, err)
			}
			in := Codex.Integrity[tt.arch]
			b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(in, "sha512-"))
			if !strings.HasPrefix(in, "sha512-") || err != nil || len(b) != 64 {
				t.Errorf("integrity %q is not npm's sha512-<base64 of 64 bytes>", in)
			}
			if CodexTarget(tt.arch) != tt.target {
				t.Errorf("target %q, want %q", CodexTarget(tt.arch), tt.target)
			}
		})
	}
	if len(Codex.URLs) != len(tests) || len(Codex.SHA256) != len(tests) || len(Codex.Integrity) != len(tests) {
		t.Errorf("codex pins %d URLs, %d SHA-256s, %d integrities; want %d of each", len(Codex.URLs), len(Codex.SHA256), len(Codex.Integrity), len(tests))
	}
	for _, s := range []string{"npm registry", "dist.integrity", "@openai/codex@" + Codex.Version + "-linux-"} {
		if !strings.Contains(Codex.DigestSource, s) {
			t.Errorf("DigestSource %q does not name %q", Codex.DigestSource, s)
		}
	}
}

// codexTarballsEnv names a directory holding npm's Codex tarballs as `npm
// pack @openai/codex@<version>-linux-<arch>` names them
// (openai-codex-<version>-linux-<arch>.tgz); TestCodexDigestsAreTheTarballs
// runs only with it, to check a new pin against what was downloaded.
const codexTarballsEnv = "HBX_CODEX_TARBALLS"

// TestCodexDigestsAreTheTarballs: each pinned SHA-256 and npm integrity of
// Codex are those of the same downloaded tarball.
func TestCodexDigestsAreTheTarballs(t *testing.T) {
	dir := os.Getenv(codexTarballsEnv)
	if dir == "" {
		t.Skip(codexTarballsEnv + " is not set")
	}
	for arch, npmArch := range map[Arch]string{ARM64: "arm64", AMD64: "x64"} {
		f, err := os.Open(filepath.Join(dir, "openai-codex-"+Codex.Version+"-linux-"+npmArch+".tgz"))
		if err != nil {
			t.Fatal(err)
		}
		s256, s512 := sha256.New(), sha512.New()
		_, err = io.Copy(io.MultiWriter(s256, s512), f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(s256.Sum(nil)); got != Codex.SHA256[arch] {
			t.Errorf("%s: tarball sha256 %s, pinned %s", arch, got, Codex.SHA256[arch])
		}
		if got := "sha512-" + base64.StdEncoding.EncodeToString(s512.Sum(nil)); got != Codex.Integrity[arch] {
			t.Errorf("%s: tarball integrity %s, pinned %s", arch, got, Codex.Integrity[arch])
		}
	}
}
