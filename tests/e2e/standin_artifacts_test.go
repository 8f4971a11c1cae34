package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// guestGateway is the host's loopback as the guest sees it through QEMU's
// user-mode network.
const guestGateway = "10.0.2.2"

// guestPinsDir is where hermes-box init copies the HBX_TEST_AGENT_PINS
// directory in the builder (host/internal/cli/testpins.go).
const guestPinsDir = "/tmp/hermes-box-test-pins"

// artifactServer serves the stand-in artifacts provisioning downloads, on
// 127.0.0.1 over HTTPS with a certificate for 127.0.0.1 and the guest's
// view of it, and counts every request. PinsDir is the directory handed to
// hermes-box init as HBX_TEST_AGENT_PINS.
type artifactServer struct {
	srv        *httptest.Server
	PinsDir    string
	UVSHA256   string
	treeSHA256 string

	mu     sync.Mutex
	served map[string][]byte
	gets   map[string]int
}

// artifactPaths are the artifacts provisioning must fetch, once each.
func artifactPaths() []string {
	return []string{"/hermes/install.sh", "/uv/uv.tar.gz", "/codex/codex.tar.gz", "/node/SHASUMS256.txt", "/node/" + nodeName() + ".tar.gz"}
}

func nodeName() string {
	if GuestArch() == "arm64" {
		return fmt.Sprintf("node-v%d.0.0-linux-arm64", pins.NodeMajor)
	}
	return fmt.Sprintf("node-v%d.0.0-linux-x64", pins.NodeMajor)
}

// otherNode is another architecture's tarball name.
func otherNode() string {
	if GuestArch() == "arm64" {
		return strings.Replace(nodeName(), "arm64", "x64", 1)
	}
	return strings.Replace(nodeName(), "x64", "arm64", 1)
}

// newArtifactServer builds the artifacts from tests/e2e/testdata/standin,
// starts the server and writes pins.json and ca.pem into PinsDir.
func newArtifactServer(t *testing.T, e *Env) *artifactServer {
	t.Helper()
	a := &artifactServer{PinsDir: t.TempDir(), served: map[string][]byte{}, gets: map[string]int{}}
	a.copyHermesTree(t, e)
	a.build(t, filepath.Join(e.Root, "tests/e2e/testdata/standin"))
	certPEM, cert := newServerCert(t)
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	a.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	_, port, err := net.SplitHostPort(a.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	base := "https://" + net.JoinHostPort(guestGateway, port)
	artifact := func(path string) map[string]string {
		return map[string]string{"url": base + path, "sha256": digest(a.served[path])}
	}
	doc := map[string]any{
		"installer": artifact("/hermes/install.sh"), "uv": artifact("/uv/uv.tar.gz"), "codex": artifact("/codex/codex.tar.gz"),
		"nodeDist": base + "/node/", "caFile": guestPinsDir + "/ca.pem",
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(a.PinsDir, "pins.json"), b, 0o644)
	writeFile(t, filepath.Join(a.PinsDir, "ca.pem"), certPEM, 0o644)
	a.UVSHA256 = digest(a.served["/uv/uv.tar.gz"])
	return a
}

// hermesTreeName is the real Hermes tree's export in the pins directory,
// which init copies into the builder with pins.json.
const hermesTreeName = "hermes-tree.tar.gz"

// HermesTreeEnv names the export of the default pinned Hermes release
// (v0.19.0.tar.gz as scripts/export-hermes-trees.sh makes it) when it is not
// in ../shared/hermes-trees beside the clone, where CI keeps it.
const HermesTreeEnv = "HBX_E2E_HERMES_TREE"

// copyHermesTree puts the real tree of the default pinned release into the
// pins directory: the stand-in installer unpacks it where the real one
// clones that commit, so the gate step installs the gate on real Hermes
// code. It is test data, never committed.
func (a *artifactServer) copyHermesTree(t *testing.T, e *Env) {
	rel, err := pins.Hermes(pins.DefaultHermesCommit)
	if err != nil {
		t.Fatal(err)
	}
	src := os.Getenv(HermesTreeEnv)
	if src == "" {
		src = filepath.Join(e.Root, "..", "shared", "hermes-trees", "v"+rel.Version+".tar.gz")
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("the real Hermes %s tree the gate step installs on (%s or %s): %v", rel.Version, "../shared/hermes-trees", HermesTreeEnv, err)
	}
	writeFile(t, filepath.Join(a.PinsDir, hermesTreeName), b, 0o644)
	a.treeSHA256 = digest(b)
}

// build makes every artifact from the stand-in files. The installer's
// `hermes mcp test` is the agent tests' stand-in, the same file.
func (a *artifactServer) build(t *testing.T, dir string) {
	mcpTest, err := os.ReadFile(filepath.Join(dir, "..", "..", "..", "..", "guest-agent", "internal", "executor", "hermeslink", "testdata", "hermes-standin.py"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		r := strings.NewReplacer("@UV_VERSION@", pins.UV.Version, "@CODEX_VERSION@", pins.Codex.Version,
			"@HERMES_TREE@", guestPinsDir+"/"+hermesTreeName, "@HERMES_TREE_SHA256@", a.treeSHA256,
			"@NODE_VERSION@", fmt.Sprintf("%d.0.0", pins.NodeMajor), "@HERMES_MCP_TEST_STANDIN@", strings.TrimSpace(string(mcpTest)))
		return []byte(r.Replace(string(b)))
	}
	a.served["/hermes/install.sh"] = read("install.sh")
	uvDir := "uv-x86_64-unknown-linux-gnu/"
	if GuestArch() == "arm64" {
		uvDir = "uv-aarch64-unknown-linux-gnu/"
	}
	a.served["/uv/uv.tar.gz"] = tarGz(t, []tarEntry{{uvDir, nil}, {uvDir + "uv", read("uv")}, {uvDir + "uvx", read("uv")}})
	a.served["/codex/codex.tar.gz"] = codexTarball(t, read("codex"))
	nd := nodeName() + "/"
	node := tarGz(t, []tarEntry{{nd, nil}, {nd + "bin/", nil}, {nd + "bin/node", read("node")},
		{nd + "bin/npm", read("npm")}, {nd + "bin/npx", read("npm")}, {nd + "bin/corepack", read("npm")}})
	a.served["/node/"+nodeName()+".tar.gz"] = node
	// The list also names another architecture's tarball, which must not be
	// the one picked.
	a.served["/node/SHASUMS256.txt"] = fmt.Appendf(nil, "%s  %s\n%s  %s\n",
		digest([]byte("other")), otherNode()+".tar.gz", digest(node), nodeName()+".tar.gz")
}

// codexTarball is laid out as npm's platform tarball of Codex
// (@openai/codex@<version>-linux-<arch>): the npm package's package.json,
// and the standalone package of the guest's target under
// package/vendor/<target>/, files only as npm packs it, the voice
// resources the install leaves out included. codex is the stand-in
// entrypoint; the helpers are scripts that do nothing.
func codexTarball(t *testing.T, codex []byte) []byte {
	arch := pins.Arch(GuestArch())
	npmArch := map[pins.Arch]string{pins.ARM64: "arm64", pins.AMD64: "x64"}[arch]
	pkg := "package/vendor/" + pins.CodexTarget(arch) + "/"
	manifest, _ := json.Marshal(map[string]any{"layoutVersion": 1, "version": pins.Codex.Version, "target": pins.CodexTarget(arch),
		"variant": "codex", "entrypoint": "bin/codex", "resourcesDir": "codex-resources", "pathDir": "codex-path"})
	npm, _ := json.Marshal(map[string]string{"name": "@openai/codex", "version": pins.Codex.Version + "-linux-" + npmArch})
	helper := []byte("#!/bin/sh\nexit 0\n")
	return tarGz(t, []tarEntry{
		{pkg + "codex-resources/bwrap", helper}, {pkg + "bin/codex", codex}, {pkg + "bin/codex-code-mode-host", helper},
		{pkg + "codex-resources/voice/bin/codex-voice-host", helper}, {pkg + "codex-path/rg", helper},
		{pkg + "codex-package.json", manifest}, {"package/package.json", npm}, {pkg + "codex-resources/voice/manifest.json", []byte("{}")},
	})
}

// codexInstalled is what the first boot leaves in the Codex release
// directory from codexTarball, each entry with its owner, sorted.
var codexInstalled = []string{"bin/codex-code-mode-host:hermes", "bin/codex:hermes", "bin:hermes", "codex-package.json:hermes",
	"codex-path/rg:hermes", "codex-path:hermes", "codex-resources/bwrap:hermes", "codex-resources:hermes"}

func (a *artifactServer) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.gets[r.Method+" "+r.URL.Path]++
	body, ok := a.served[r.URL.Path]
	a.mu.Unlock()
	if !ok || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(body)
}

// requests returns every request so far, sorted, with its count.
func (a *artifactServer) requests() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.gets))
	for k, v := range a.gets {
		out[k] = v
	}
	return out
}

// checkFetchedOnce fails unless each artifact was fetched exactly once and
// nothing else was asked for.
func (a *artifactServer) checkFetchedOnce(t *testing.T) {
	t.Helper()
	got := a.requests()
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := map[string]int{}
	for _, p := range artifactPaths() {
		want["GET "+p] = 1
	}
	for _, k := range keys {
		if want[k] != got[k] {
			t.Errorf("artifact server: %s requested %d times, want %d (all: %v)", k, got[k], want[k], got)
		}
	}
	for k := range want {
		if got[k] == 0 {
			t.Errorf("artifact server: %s was never requested (all: %v)", k, got)
		}
	}
}

type tarEntry struct {
	name string
	body []byte // nil for a directory (name ends in "/")
}

// tarGz packs entries; files are executable (the stand-ins are commands)
// except JSON.
func tarGz(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, en := range entries {
		h := &tar.Header{Name: en.name, Mode: 0o755, ModTime: time.Unix(1700000000, 0), Typeflag: tar.TypeDir}
		if !strings.HasSuffix(en.name, "/") {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(en.body))
			if strings.HasSuffix(en.name, ".json") {
				h.Mode = 0o644
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(en.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// newServerCert makes a self-signed certificate for 127.0.0.1 and the
// guest's gateway address; the guest trusts it through the pins' caFile.
func newServerCert(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "hermes-box e2e artifacts"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(guestGateway)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, cert
}

func writeFile(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
}
