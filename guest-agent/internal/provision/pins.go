package provision

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// Artifact is one download: where and which bytes.
type Artifact struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// Pins is what one provisioning run installs, resolved from shared/pins for
// one architecture. It is a copy: nothing here writes to shared/pins.
type Pins struct {
	Arch         pins.Arch
	HermesCommit string
	Installer    Artifact
	UVVersion    string
	UV           Artifact
	CodexVersion string
	CodexTarget  string
	Codex        Artifact
	NodeMajor    int
	// NodeDist is the release directory holding SHASUMS256.txt, ending in "/".
	NodeDist string
}

// Overrides are digests the user supplied in hermes-box.conf for artifacts
// that shared/pins does not know on this architecture.
type Overrides struct {
	UVSHA256    string
	CodexSHA256 string
}

// ResolvePins looks up everything for arch and commit in shared/pins. An
// artifact without a known digest refuses with shared/pins' message, which
// names the hermes-box.conf key that supplies one.
func ResolvePins(arch pins.Arch, commit string, o Overrides) (Pins, error) {
	if arch != pins.ARM64 && arch != pins.AMD64 {
		return Pins{}, fmt.Errorf("unsupported guest architecture %q: want %s or %s", arch, pins.ARM64, pins.AMD64)
	}
	if commit == "" {
		commit = pins.DefaultHermesCommit
	}
	h, err := pins.Hermes(commit)
	if err != nil {
		return Pins{}, err
	}
	uvSum, err := pins.UV.Digest(arch, o.UVSHA256)
	if err != nil {
		return Pins{}, err
	}
	codexSum, err := pins.Codex.Digest(arch, o.CodexSHA256)
	if err != nil {
		return Pins{}, err
	}
	return Pins{
		Arch:         arch,
		HermesCommit: h.Commit,
		Installer:    Artifact{URL: h.InstallerURL(), SHA256: h.InstallerSHA256},
		UVVersion:    pins.UV.Version,
		UV:           Artifact{URL: pins.UV.URL(arch), SHA256: uvSum},
		CodexVersion: pins.Codex.Version,
		CodexTarget:  pins.CodexTarget(arch),
		Codex:        Artifact{URL: pins.Codex.URL(arch), SHA256: codexSum},
		NodeMajor:    pins.NodeMajor,
		NodeDist:     "https://nodejs.org/dist/latest-v" + strconv.Itoa(pins.NodeMajor) + ".x/",
	}, nil
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (p Pins) validate() error {
	if p.NodeMajor <= 0 || p.HermesCommit == "" || p.UVVersion == "" || p.CodexVersion == "" || p.CodexTarget == "" {
		return fmt.Errorf("incomplete pins: %+v", p)
	}
	for name, a := range map[string]Artifact{"installer": p.Installer, "uv": p.UV, "codex": p.Codex} {
		if err := a.validate(); err != nil {
			return fmt.Errorf("pin %s: %w", name, err)
		}
	}
	if err := httpsURL(p.NodeDist); err != nil || !strings.HasSuffix(p.NodeDist, "/") {
		return fmt.Errorf("pin node dist: %q is not an https directory address", p.NodeDist)
	}
	return nil
}

func httpsURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("url %q is not an https address", s)
	}
	return nil
}

func (a Artifact) validate() error {
	if err := httpsURL(a.URL); err != nil {
		return err
	}
	if !sha256Hex.MatchString(a.SHA256) {
		return fmt.Errorf("sha256 %q is not 64 lowercase hex digits", a.SHA256)
	}
	return nil
}

// TestPins is the file of stand-in artifacts that tests, and only tests,
// point the agent at (the hook is named only in binaries built with the
// hbxtest tag; see the agent's cli/provision_testpins_hbxtest.go). Every field is optional; a set
// field replaces that part of the resolved pins in this run only.
type TestPins struct {
	Installer *Artifact `json:"installer,omitempty"`
	UV        *Artifact `json:"uv,omitempty"`
	Codex     *Artifact `json:"codex,omitempty"`
	NodeDist  string    `json:"nodeDist,omitempty"`
	// CAFile is a PEM file of the test server's certificate authority.
	CAFile string `json:"caFile,omitempty"`
}

// LoadTestPins reads a TestPins file and applies it to a copy of p.
func LoadTestPins(path string, p Pins) (Pins, TestPins, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return p, TestPins{}, fmt.Errorf("reading test pins: %w", err)
	}
	var t TestPins
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return p, TestPins{}, fmt.Errorf("test pins %s: %w", path, err)
	}
	for name, a := range map[string]*Artifact{"installer": t.Installer, "uv": t.UV, "codex": t.Codex} {
		if a == nil {
			continue
		}
		if err := a.validate(); err != nil {
			return p, TestPins{}, fmt.Errorf("test pins %s: field %s: %w", path, name, err)
		}
	}
	if t.Installer != nil {
		p.Installer = *t.Installer
	}
	if t.UV != nil {
		p.UV = *t.UV
	}
	if t.Codex != nil {
		p.Codex = *t.Codex
	}
	if t.NodeDist != "" {
		p.NodeDist = t.NodeDist
	}
	return p, t, p.validate()
}
