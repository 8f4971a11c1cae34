package provision

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/download"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// timeline is one ordered log shared by the server, the runner and the
// event sink, so a test can prove download → verify → install order.
type timeline struct {
	mu    sync.Mutex
	lines []string
}

func (tl *timeline) add(s string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, s)
}

func (tl *timeline) snapshot() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]string(nil), tl.lines...)
}

// index returns the position of the first line containing s, or -1.
func (tl *timeline) index(s string) int {
	for i, l := range tl.snapshot() {
		if strings.Contains(l, s) {
			return i
		}
	}
	return -1
}

// eventLog records events and mirrors the interesting ones to a timeline.
type eventLog struct {
	mu     sync.Mutex
	events []protocol.Event
	tl     *timeline
}

func (e *eventLog) Emit(ev protocol.Event) error {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
	if ev.Type == protocol.EventLog && ev.Level != protocol.LevelDebug {
		e.tl.add("event " + ev.Step + ": " + ev.Message)
	}
	return nil
}

func (e *eventLog) all() []protocol.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]protocol.Event(nil), e.events...)
}

// fakeRunner records every command and plays the part of the system tools
// on the test root: apt-get writes dpkg's status, groupadd/useradd/passwd
// edit the account files. Handlers replace or extend that per test.
type fakeRunner struct {
	t        *testing.T
	root     string
	owner    Owner
	tl       *timeline
	mu       sync.Mutex
	calls    []command.Command
	handlers map[string]func(c command.Command) (command.Output, error)
}

func (r *fakeRunner) Run(ctx context.Context, c command.Command) (command.Output, error) {
	if c.Timeout <= 0 {
		r.t.Errorf("command %s has no timeout", c)
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	h := r.handlers[r.key(c)]
	r.mu.Unlock()
	r.tl.add("run " + c.String())
	if h != nil {
		return h(c)
	}
	return r.system(c)
}

// key names the program a command runs (through runuser, the inner one).
func (r *fakeRunner) key(c command.Command) string {
	if filepath.Base(c.Path) == "runuser" && len(c.Args) > 3 {
		return filepath.Base(c.Args[3])
	}
	if filepath.Base(c.Path) == "bash" {
		return "bash"
	}
	return filepath.Base(c.Path)
}

func (r *fakeRunner) commands() []command.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]command.Command(nil), r.calls...)
}

// lines returns the recorded command lines with the root replaced by ROOT.
func (r *fakeRunner) lines() []string {
	var out []string
	for _, c := range r.commands() {
		out = append(out, strings.ReplaceAll(c.String(), r.root, "ROOT"))
	}
	return out
}

func (r *fakeRunner) appendFile(guest, text string) {
	path := filepath.Join(r.root, guest)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		r.t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		r.t.Fatal(err)
	}
}

func (r *fakeRunner) system(c command.Command) (command.Output, error) {
	a := c.Args
	switch r.key(c) {
	case "apt-get":
		if len(a) > 0 && a[0] == "update" {
			r.appendFile("/var/lib/apt/lists/ports.ubuntu.com_ubuntu-ports_dists_noble_InRelease", "index\n")
		}
		if len(a) > 0 && a[0] == "install" {
			for _, pkg := range a[3:] {
				r.appendFile("/var/lib/dpkg/status", "Package: "+pkg+"\nStatus: install ok installed\n\n")
			}
		}
	case "groupadd":
		r.appendFile("/etc/group", a[2]+":x:"+a[1]+":\n")
	case "useradd":
		name := a[len(a)-1]
		r.appendFile("/etc/passwd", fmt.Sprintf("%s:x:%s:%s::/home/%s:/bin/bash\n", name, a[1], a[3], name))
		r.appendFile("/etc/shadow", name+":!:20000:0:99999:7:::\n")
		home := filepath.Join(r.root, "home", name)
		if err := os.MkdirAll(home, 0o750); err != nil {
			r.t.Fatal(err)
		}
		var id int
		fmt.Sscan(a[1], &id)
		if err := r.owner.Lchown(home, id, id); err != nil {
			r.t.Fatal(err)
		}
	case "passwd":
		r.editShadow(a[1], a[0])
	case "uv":
		if len(a) == 1 && a[0] == "--version" {
			return command.Output{Stdout: []byte("uv " + pins.UV.Version + " (stand-in)\n")}, nil
		}
	}
	return command.Output{}, nil
}

func (r *fakeRunner) editShadow(name, flag string) {
	path := filepath.Join(r.root, "etc/shadow")
	b, err := os.ReadFile(path)
	if err != nil {
		r.t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		f := strings.Split(l, ":")
		if f[0] != name || len(f) < 2 {
			continue
		}
		if flag == "--delete" {
			f[1] = ""
		} else if !strings.HasPrefix(f[1], "!") {
			f[1] = "!" + f[1]
		}
		lines[i] = strings.Join(f, ":")
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o640); err != nil {
		r.t.Fatal(err)
	}
}

// realCommand runs c for real, for validators such as visudo and sshd.
func realCommand(c command.Command) (command.Output, error) {
	return command.ExecRunner{KillAfter: 5 * time.Second}.Run(context.Background(), c)
}

// inodeOwner is the Owner for tests that do not run as root: it remembers
// ownership per inode, so renames keep it, and falls back to the real one.
type inodeOwner struct {
	mu sync.Mutex
	m  map[uint64][2]int
}

func (o *inodeOwner) ino(path string) (uint64, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	return fi.Sys().(*syscall.Stat_t).Ino, nil
}

func (o *inodeOwner) Lchown(path string, uid, gid int) error {
	ino, err := o.ino(path)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[ino] = [2]int{uid, gid}
	return nil
}

func (o *inodeOwner) Owner(path string) (int, int, error) {
	ino, err := o.ino(path)
	if err != nil {
		return 0, 0, err
	}
	o.mu.Lock()
	v, ok := o.m[ino]
	o.mu.Unlock()
	if ok {
		return v[0], v[1], nil
	}
	return SystemOwner{}.Owner(path)
}

// testOwner is the real owner as root (CI) and the inode-keyed fake otherwise.
func testOwner() Owner {
	if os.Geteuid() == 0 {
		return SystemOwner{}
	}
	return &inodeOwner{m: map[uint64][2]int{}}
}

// artifact is one stand-in file the test server serves.
type artifact struct {
	body []byte
	sum  string
}

func newArtifact(b []byte) artifact {
	s := sha256.Sum256(b)
	return artifact{body: b, sum: hex.EncodeToString(s[:])}
}

const nodeTarball = "node-v26.99.1-linux-arm64.tar.gz"

// codexArm64 is the Codex target of the fixture's pins (arm64's).
const codexArm64 = "aarch64-unknown-linux-musl"

// codexManifestJSON is the codex-package.json of Codex 0.171.0 for target, as
// the npm tarballs carry it.
func codexManifestJSON(target string) string {
	return `{"layoutVersion":1,"version":"0.171.0","target":"` + target + `","variant":"codex","entrypoint":"bin/codex","resourcesDir":"codex-resources","pathDir":"codex-path"}`
}

// codexTarball is laid out as npm's platform tarball of Codex 0.171.0
// (@openai/codex@0.171.0-linux-<arch>): the npm package's package.json and
// README, and the standalone package of target under
// package/vendor/<target>/, files only (npm's tarballs carry no directory
// entries), voice resources included. An empty manifest leaves
// codex-package.json out.
func codexTarball(target, manifest string) []tartest.Entry {
	pkg := "package/vendor/" + target + "/"
	entries := []tartest.Entry{
		{Name: pkg + "codex-resources/bwrap", Body: "#!/bin/sh\necho bwrap\n", Mode: 0o755},
		{Name: pkg + "bin/codex", Body: "#!/bin/sh\necho codex-cli 0.171.0\n", Mode: 0o755},
		{Name: pkg + "bin/codex-code-mode-host", Body: "#!/bin/sh\n", Mode: 0o755},
		{Name: pkg + "codex-resources/voice/bin/codex-voice-host", Body: "#!/bin/sh\n", Mode: 0o755},
		{Name: pkg + "codex-path/rg", Body: "#!/bin/sh\necho rg\n", Mode: 0o755},
		{Name: pkg + "codex-resources/voice/lib/libopus.so.0", Body: "elf", Mode: 0o755},
		{Name: "package/package.json", Body: `{"name":"@openai/codex","version":"0.171.0-linux-arm64"}`, Mode: 0o644},
		{Name: pkg + "codex-resources/voice/manifest.json", Body: "{}", Mode: 0o644},
		{Name: "package/README.md", Body: "Codex CLI\n", Mode: 0o644},
	}
	if manifest != "" {
		entries = append(entries, tartest.Entry{Name: pkg + "codex-package.json", Body: manifest, Mode: 0o644})
	}
	return entries
}

// fixture is a temp root, a loopback HTTPS server with stand-in artifacts,
// a recording runner and a shared timeline.
type fixture struct {
	t         *testing.T
	root      string
	owner     Owner
	runner    *fakeRunner
	events    *eventLog
	tl        *timeline
	srv       *httptest.Server
	served    map[string][]byte
	pins      Pins
	testPins  TestPins
	installer artifact
	uv        artifact
	codex     artifact
	node      artifact
	client    *download.Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, root: t.TempDir(), owner: testOwner(), tl: &timeline{}, served: map[string][]byte{}}
	f.events = &eventLog{tl: f.tl}
	f.runner = &fakeRunner{t: t, root: f.root, owner: f.owner, tl: f.tl, handlers: map[string]func(command.Command) (command.Output, error){}}
	f.runner.handlers["bash"] = func(c command.Command) (command.Output, error) { return realCommand(c) }
	f.writeRoot("/etc/hostname", "hermes-box-builder\n", 0o644)
	f.writeRoot("/etc/hosts", "127.0.0.1 localhost\n", 0o644)
	f.makeArtifacts()
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.tl.add("GET " + r.URL.Path)
		b, ok := f.served[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(f.srv.Close)
	f.pins = f.standInPins()
	pool := x509.NewCertPool()
	pool.AddCert(f.srv.Certificate())
	f.client = download.New(download.Options{CacheDir: filepath.Join(f.root, "var/cache/hermes-box/downloads"), RootCAs: pool,
		Attempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }})
	return f
}

func (f *fixture) makeArtifacts() {
	script, err := os.ReadFile("testdata/install.sh")
	if err != nil {
		f.t.Fatal(err)
	}
	f.installer = newArtifact(script)
	f.uv = newArtifact(tartest.TarGz(f.t, []tartest.Entry{
		{Name: "uv-aarch64-unknown-linux-gnu/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "uv-aarch64-unknown-linux-gnu/uv", Body: "#!/bin/sh\necho uv\n", Mode: 0o755},
		{Name: "uv-aarch64-unknown-linux-gnu/uvx", Body: "#!/bin/sh\necho uvx\n", Mode: 0o755},
	}))
	f.codex = newArtifact(tartest.TarGz(f.t, codexTarball(codexArm64, codexManifestJSON(codexArm64))))
	top := strings.TrimSuffix(nodeTarball, ".tar.gz")
	f.node = newArtifact(tartest.TarGz(f.t, []tartest.Entry{
		{Name: top + "/", Type: tar.TypeDir, Mode: 0o775},
		{Name: top + "/bin/node", Body: "#!/bin/sh\necho v26.99.1\n", Mode: 0o775},
		{Name: top + "/lib/node_modules/npm/bin/npm-cli.js", Body: "// npm\n", Mode: 0o775},
		{Name: top + "/lib/node_modules/npm/bin/npx-cli.js", Body: "// npx\n", Mode: 0o775},
		{Name: top + "/lib/node_modules/corepack/dist/corepack.js", Body: "// corepack\n", Mode: 0o664},
		tartest.Symlink(top+"/bin/npm", "../lib/node_modules/npm/bin/npm-cli.js"),
		tartest.Symlink(top+"/bin/npx", "../lib/node_modules/npm/bin/npx-cli.js"),
		tartest.Symlink(top+"/bin/corepack", "../lib/node_modules/corepack/dist/corepack.js"),
	}))
	sums := fmt.Sprintf("%s  node-v26.99.1-linux-arm64.tar.xz\n%s  %s\n%s  node-v26.99.1-linux-x64.tar.gz\n%s  node-v26.99.1.tar.gz\n",
		strings.Repeat("1", 64), f.node.sum, nodeTarball, strings.Repeat("2", 64), strings.Repeat("3", 64))
	f.served["/hermes/install.sh"] = f.installer.body
	f.served["/uv/uv.tar.gz"] = f.uv.body
	f.served["/codex/codex.tar.gz"] = f.codex.body
	f.served["/node/latest-v26.x/SHASUMS256.txt"] = []byte(sums)
	f.served["/node/latest-v26.x/"+nodeTarball] = f.node.body
}

// standInPins writes the test-only pins file and loads it the way the
// agent does, on top of the production pins for arm64.
func (f *fixture) standInPins() Pins {
	prod, err := ResolvePins(pins.ARM64, "", Overrides{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.testPins = TestPins{
		Installer: &Artifact{URL: f.srv.URL + "/hermes/install.sh", SHA256: f.installer.sum},
		UV:        &Artifact{URL: f.srv.URL + "/uv/uv.tar.gz", SHA256: f.uv.sum},
		Codex:     &Artifact{URL: f.srv.URL + "/codex/codex.tar.gz", SHA256: f.codex.sum},
		NodeDist:  f.srv.URL + "/node/latest-v26.x/",
	}
	b, err := json.Marshal(f.testPins)
	if err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(f.t.TempDir(), "test-pins.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		f.t.Fatal(err)
	}
	p, _, err := LoadTestPins(path, prod)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) writeRoot(guest, content string, mode os.FileMode) {
	f.t.Helper()
	path := filepath.Join(f.root, guest)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) config() Config {
	return Config{Root: f.root, Pins: f.pins, Runner: f.runner, Owner: f.owner, Fetcher: f.client, Events: f.events,
		Sleep: func(context.Context, time.Duration) error { return nil },
		Now:   func() time.Time { return time.Unix(1790000000, 0) }}
}

// provisioner builds a Provisioner limited to the named steps (all if none).
func (f *fixture) provisioner(cfg Config, names ...string) *Provisioner {
	f.t.Helper()
	p, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(names) > 0 {
		var keep []Step
		// The first boot's steps are runnable by name too.
		for _, s := range append(p.steps, FirstBootSteps()...) {
			for _, n := range names {
				if s.Name == n {
					keep = append(keep, s)
				}
			}
		}
		if len(keep) != len(names) {
			f.t.Fatalf("unknown step in %v", names)
		}
		p.steps = keep
	}
	return p
}

// wantFile checks a file's content (when want is not nil), mode and owner.
func (f *fixture) wantFile(guest string, want []byte, mode os.FileMode, uid, gid int) {
	f.t.Helper()
	path := filepath.Join(f.root, guest)
	fi, err := os.Lstat(path)
	if err != nil {
		f.t.Errorf("%s: %v", guest, err)
		return
	}
	if want != nil {
		got, _ := os.ReadFile(path)
		if !bytes.Equal(got, want) {
			f.t.Errorf("%s: content %q, want %q", guest, got, want)
		}
	}
	if fi.Mode().Perm() != mode {
		f.t.Errorf("%s: mode %04o, want %04o", guest, fi.Mode().Perm(), mode)
	}
	if u, g, err := f.owner.Owner(path); err != nil || u != uid || g != gid {
		f.t.Errorf("%s: owner %d:%d (%v), want %d:%d", guest, u, g, err, uid, gid)
	}
}

func (f *fixture) wantLink(guest, target string) {
	f.t.Helper()
	got, err := os.Readlink(filepath.Join(f.root, guest))
	if err != nil || got != target {
		f.t.Errorf("%s -> %q (%v), want %q", guest, got, err, target)
	}
}

// runTwice runs p, checks the first run changed something, then runs it
// again and checks that the second run ran no command and changed nothing.
func (f *fixture) runTwice(p *Provisioner) Report {
	f.t.Helper()
	rep, err := p.Run(f.t.Context())
	if err != nil {
		f.t.Fatalf("first run: %v", err)
	}
	if rep.Changed == 0 {
		f.t.Fatalf("first run changed nothing: %+v", rep)
	}
	before := len(f.runner.commands())
	again, err := p.Run(f.t.Context())
	if err != nil {
		f.t.Fatalf("second run: %v", err)
	}
	if again.Changed != 0 || len(f.runner.commands()) != before {
		f.t.Fatalf("second run changed %d steps and ran %v", again.Changed, f.runner.lines()[before:])
	}
	return rep
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is needed in CI: %v", name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
	return path
}
