package provision

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/download"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKgH0p4zqJ1NnxcZ+Wb4C4bZ0zj0Q2e0pXx9Kp2n0A7b project\n"

// e2eFixture is a fixture whose validators are the real visudo and sshd
// when this machine has them and runs as root.
func e2eFixture(t *testing.T) (*fixture, Config) {
	f := newFixture(t)
	if os.Geteuid() == 0 {
		if _, err := os.Stat("/usr/sbin/visudo"); err == nil {
			f.runner.handlers["visudo"] = realCommand
		}
		if _, err := os.Stat("/usr/sbin/sshd"); err == nil {
			if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
				t.Fatal(err)
			}
			f.runner.handlers["sshd"] = func(c command.Command) (command.Output, error) {
				if strings.Contains(c.Args[len(c.Args)-1], "hermes-box-sshd-check-") {
					return realCommand(c)
				}
				return command.Output{}, nil
			}
		}
	}
	cfg := f.config()
	cfg.AuthorizedKeys = []byte(testKey)
	return f, cfg
}

func TestProvisionEndToEnd(t *testing.T) {
	f, cfg := e2eFixture(t)
	p := f.provisioner(cfg)
	rep := f.runTwice(p)
	for _, s := range rep.Steps {
		want := stateChanged
		if s.Name == "gated-approval" {
			want = stateSkipped
		}
		if s.State != want {
			t.Errorf("step %s: %s, want %s", s.Name, s.State, want)
		}
	}
	plan, err := p.Plan(t.Context())
	if err != nil || plan.Changed != 0 {
		t.Fatalf("plan on a provisioned root: %+v, %v", plan, err)
	}

	t.Run("download, verify, install order", func(t *testing.T) { checkOrder(t, f) })
	t.Run("installer stages", func(t *testing.T) { checkStages(t, f) })
	t.Run("commands", func(t *testing.T) { checkCommands(t, f) })
	t.Run("cleanup", func(t *testing.T) {
		for _, gone := range []string{"usr/local/lib/hermes-agent/.git", "usr/local/lib/hermes-agent/tests", "usr/local/lib/hermes-agent/website", "var/cache/hermes-box", "var/lib/apt/lists/ports.ubuntu.com_ubuntu-ports_dists_noble_InRelease"} {
			if exists(filepath.Join(f.root, gone)) {
				t.Errorf("%s survived the cleanup", gone)
			}
		}
		f.wantFile("/workspace/hermes-home/installer-stages.log", nil, 0o644, boxlayout.ServiceUID, boxlayout.ServiceUID)
		f.wantFile("/usr/local/lib/hermes-agent/venv/bin/python", nil, 0o755, rootID, rootID)
	})
	t.Run("workspace seed", func(t *testing.T) { checkSeedArchive(t, f) })
	t.Run("events", func(t *testing.T) { checkEvents(t, f, len(rep.Steps)) })
	t.Run("production pins untouched", checkProductionPins)
}

func checkOrder(t *testing.T, f *fixture) {
	order := [][]string{
		{"GET /node/latest-v26.x/SHASUMS256.txt", "GET /node/latest-v26.x/" + nodeTarball, "event node: " + nodeTarball + " verified", "event node: installed " + nodeTarball},
		{"GET /uv/uv.tar.gz", "event uv: uv 0.11.21 verified", "run " + filepath.Join(f.root, "workspace/hermes-home/bin/uv") + " --version"},
		{"GET /hermes/install.sh", "event hermes: Hermes installer verified", "--stage repository", "event hermes: installer stage complete done"},
		// Nothing is downloaded before the system's packages are in.
		{"run apt-get install", "GET /node/latest-v26.x/SHASUMS256.txt"},
	}
	for _, chain := range order {
		prev := -1
		for _, step := range chain {
			i := f.tl.index(step)
			if i < 0 || i < prev {
				t.Errorf("%q at %d after %d in chain %v\ntimeline:\n%s", step, i, prev, chain, strings.Join(f.tl.snapshot(), "\n"))
				break
			}
			prev = i
		}
	}
	// Each artifact was fetched exactly once.
	// Codex is the first boot's (FirstBootSteps), never provisioning's.
	if i := f.tl.index("GET /codex/codex.tar.gz"); i >= 0 {
		t.Errorf("provisioning fetched Codex (timeline line %d); the first boot installs it", i)
	}
	for _, get := range []string{"/hermes/install.sh", "/uv/uv.tar.gz", "/node/latest-v26.x/" + nodeTarball} {
		n := 0
		for _, l := range f.tl.snapshot() {
			if l == "GET "+get {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s fetched %d times", get, n)
		}
	}
}

func checkStages(t *testing.T, f *fixture) {
	b, err := os.ReadFile(filepath.Join(f.root, "workspace/hermes-home/installer-stages.log"))
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, s := range HermesStages {
		want += s + " " + f.pins.HermesCommit + "\n"
	}
	if string(b) != want {
		t.Errorf("the installer ran stages:\n%s\nwant:\n%s", b, want)
	}
	for _, c := range f.runner.commands() {
		if c.Path == "/bin/bash" && c.Timeout != 20*time.Minute {
			t.Errorf("%s: timeout %s, want 20m", c, c.Timeout)
		}
	}
}

func checkCommands(t *testing.T, f *fixture) {
	lines := f.runner.lines()
	want := []string{
		"apt-get update -o APT::Update::Error-Mode=any",
		"useradd --uid 1002 --gid 1002 --create-home --shell /bin/bash hermes",
		"ROOT/workspace/hermes-home/bin/uv sync --extra all --extra messaging --locked",
		"runuser -u hermes -- ROOT/usr/local/bin/hermes --version",
		"runuser -u hermes -- ROOT/usr/local/lib/hermes-agent/venv/bin/python -c import discord",
		"ROOT/usr/local/bin/node --version",
		"infocmp tmux-256color",
		"ssh-keygen -A -f ROOT",
		"/usr/sbin/sshd -t -f ROOT/etc/ssh/sshd_config",
	}
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("no command %q in\n%s", w, strings.Join(lines, "\n"))
		}
	}
	for _, l := range lines {
		for _, bad := range []string{"skopeo", "supervisor", "uv pip install"} {
			if strings.Contains(l, bad) {
				t.Errorf("command %q uses %s", l, bad)
			}
		}
	}
	for _, c := range f.runner.commands() {
		if b := filepath.Base(c.Path); b == "curl" || b == "wget" || b == "sha256sum" {
			t.Errorf("command %s downloads or checks outside the verified downloader", c)
		}
	}
	for _, c := range f.runner.commands() {
		if strings.HasSuffix(c.Path, "/uv") && len(c.Args) > 0 && c.Args[0] == "sync" {
			env := strings.Join(c.Env, " ")
			if c.Dir != filepath.Join(f.root, boxlayout.HermesTree) || !strings.Contains(env, "UV_PROJECT_ENVIRONMENT="+filepath.Join(f.root, boxlayout.HermesVenv)) || c.Timeout != 20*time.Minute {
				t.Errorf("uv sync in %s with %s (%s)", c.Dir, env, c.Timeout)
			}
		}
	}
}

func checkSeedArchive(t *testing.T, f *fixture) {
	id, err := os.ReadFile(filepath.Join(f.root, "var/lib/hermes-box/workspace-seed.id"))
	if err != nil || !strings.HasPrefix(string(id), "base-1790000000-") {
		t.Fatalf("seed id %q, %v", id, err)
	}
	f.wantFile("/var/lib/hermes-box/workspace-seed.tar", nil, 0o600, 0, 0)
	fh, err := os.Open(filepath.Join(f.root, "var/lib/hermes-box/workspace-seed.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	got := map[string]*tar.Header{}
	tr := tar.NewReader(fh)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		if h.Name == "./.hermes-box-snapshot-id" {
			b, _ := io.ReadAll(tr)
			if string(b) != string(id) {
				t.Errorf("archived id %q, want %q", b, id)
			}
		}
	}
	checks := []struct {
		name string
		mode int64
		uid  int
		link string
	}{
		{"./", 0o750, boxlayout.ServiceUID, ""},
		{"./hermes-home/", 0o700, boxlayout.ServiceUID, ""},
		{"./hermes-home/bin/uv", 0o755, boxlayout.ServiceUID, ""},
		{"./codex-home/", 0o700, boxlayout.ServiceUID, ""},
		{"./.hermes-box-snapshot-id", 0o600, 0, ""},
	}
	for name := range got {
		if strings.HasPrefix(name, "./codex-home/packages") || name == "./codex-home/config.toml" {
			t.Errorf("the seed carries %s; Codex is installed on the first boot", name)
		}
	}
	for _, c := range checks {
		h := got[c.name]
		if h == nil {
			t.Errorf("seed lacks %s", c.name)
			continue
		}
		if h.Mode&0o777 != c.mode || h.Uid != c.uid || h.Linkname != c.link {
			t.Errorf("%s: mode %o uid %d link %q; want %o %d %q", c.name, h.Mode, h.Uid, h.Linkname, c.mode, c.uid, c.link)
		}
	}
}

func checkEvents(t *testing.T, f *fixture, steps int) {
	started, ended := map[string]bool{}, map[string]bool{}
	var progress int
	for _, ev := range f.events.all() {
		switch {
		case ev.Type == protocol.EventStep && ev.State == protocol.StepStarted:
			started[ev.Step] = true
		case ev.Type == protocol.EventStep && (ev.State == protocol.StepDone || ev.State == protocol.StepSkipped):
			ended[ev.Step] = true
		case ev.Type == protocol.EventProgress:
			progress++
			if ev.Progress.Total != int64(steps) || ev.Progress.Unit != "steps" {
				t.Errorf("progress %+v", ev.Progress)
			}
		}
	}
	if len(started) != steps || len(ended) != steps || progress == 0 {
		t.Errorf("%d started, %d ended, %d progress events for %d steps", len(started), len(ended), progress, steps)
	}
}

func checkProductionPins(t *testing.T) {
	if pins.UV.SHA256[pins.ARM64] != "88e800834007cc5efd4675f166eb2a51e7e3ad19876d85fa8805a6fb5c922397" ||
		pins.Codex.SHA256[pins.ARM64] != "26ae27788c7d962ae64321aba4673f918b99b40c4655246930bf962fa5b81b01" ||
		pins.HermesReleases[0].InstallerSHA256 != "c5ba7e89627577fab914514736ecfb3359b66956ca00199bfef616ca35953cb9" ||
		!strings.HasPrefix(pins.UV.URL(pins.ARM64), "https://github.com/astral-sh/uv/") {
		t.Fatal("a test run changed shared/pins")
	}
	prod, err := ResolvePins(pins.ARM64, "", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []Artifact{prod.Installer, prod.UV, prod.Codex} {
		if strings.Contains(a.URL, "127.0.0.1") {
			t.Errorf("production pins point at the test server: %s", a.URL)
		}
	}
	if prod.NodeDist != "https://nodejs.org/dist/latest-v26.x/" {
		t.Errorf("node dist %s", prod.NodeDist)
	}
}

func TestProvisionStopsAtTheFirstFailureAndResumes(t *testing.T) {
	f, cfg := e2eFixture(t)
	// The smoke checks fail: a terminfo entry is missing.
	f.runner.handlers["infocmp"] = func(command.Command) (command.Output, error) {
		return command.Output{Stderr: []byte("infocmp: couldn't open terminfo file")}, errors.New("exit status 1")
	}
	p := f.provisioner(cfg)
	rep, err := p.Run(t.Context())
	var se *StepError
	if !errors.As(err, &se) || se.Step != "smoke" || !strings.Contains(err.Error(), "smoke check") {
		t.Fatalf("got %v; want step smoke failing", err)
	}
	if last := rep.Steps[len(rep.Steps)-1]; last.Name != "smoke" {
		t.Fatalf("the run went on to %s", last.Name)
	}
	for _, never := range []string{"var/lib/hermes-box/smoke-passed", "var/lib/hermes-box/workspace-seed.tar"} {
		if exists(filepath.Join(f.root, never)) {
			t.Errorf("%s exists after the failed run", never)
		}
	}
	ran := len(f.runner.commands())
	delete(f.runner.handlers, "infocmp")
	rep, err = p.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Steps {
		if s.State == stateChanged && !slices.Contains([]string{"smoke", "workspace-seed", "finalize"}, s.Name) {
			t.Errorf("the resumed run redid step %s", s.Name)
		}
	}
	for _, l := range f.runner.lines()[ran:] {
		if strings.Contains(l, "apt-get") || strings.Contains(l, "--stage") {
			t.Errorf("the resumed run repeated %q", l)
		}
	}
}

// TestFirstBootCodex: provisioning records the Codex pin in the image; the
// first boot's steps install the verified package from it (a tampered one
// is refused with nothing installed), lay it out as `codex update` keeps
// it, seed config.toml only when there is none, and run no command.
func TestFirstBootCodex(t *testing.T) {
	f, cfg := e2eFixture(t)
	if _, err := f.provisioner(cfg, "codex-pin").Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	pin, err := ReadCodexPin(f.root)
	if err != nil || pin.Archive != cfg.Pins.Codex || pin.Target != "aarch64-unknown-linux-musl" {
		t.Fatalf("pin %+v, %v", pin, err)
	}
	good := f.served["/codex/codex.tar.gz"]
	f.served["/codex/codex.tar.gz"] = []byte("tampered package")
	first := func() (Report, error) {
		p, err := NewFirstBoot(Config{Root: f.root, Owner: f.owner, Fetcher: cfg.Fetcher, Events: cfg.Events}, pin)
		if err != nil {
			t.Fatal(err)
		}
		return p.Run(t.Context())
	}
	_, err = first()
	var se *StepError
	if !errors.As(err, &se) || se.Step != "codex" || !errors.Is(err, download.ErrDigestMismatch) {
		t.Fatalf("got %v; want step codex failing on the digest", err)
	}
	for _, never := range []string{"workspace/codex-home/packages/standalone/current", "workspace/codex-home/bin/codex", "workspace/codex-home/config.toml"} {
		if exists(filepath.Join(f.root, never)) {
			t.Errorf("%s exists after the refused package", never)
		}
	}
	f.served["/codex/codex.tar.gz"] = good
	if rep, err := first(); err != nil || rep.Changed != 2 {
		t.Fatalf("first boot: %+v, %v", rep, err)
	}
	f.wantLink("/workspace/codex-home/packages/standalone/current", "releases/0.171.0-aarch64-unknown-linux-musl")
	f.wantLink("/workspace/codex-home/bin/codex", "../packages/standalone/current/bin/codex")
	f.wantFile("/workspace/codex-home/config.toml", nil, 0o600, boxlayout.ServiceUID, boxlayout.ServiceUID)
	// The user's configuration survives later boots.
	if err := os.WriteFile(filepath.Join(f.root, "workspace/codex-home/config.toml"), []byte("model = \"mine\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rep, err := first(); err != nil || rep.Changed != 0 {
		t.Fatalf("second boot: %+v, %v", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "workspace/codex-home/config.toml")); string(b) != "model = \"mine\"\n" {
		t.Errorf("config.toml after a later boot: %q", b)
	}
	for _, l := range f.runner.lines() {
		if strings.Contains(l, "codex") {
			t.Errorf("the first boot ran a command: %s", l)
		}
	}
}
