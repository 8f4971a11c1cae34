package provision

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/download"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
	"github.com/hermes-box/hermes-box/guest-agent/internal/tartest"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func TestFileSteps(t *testing.T) {
	tests := []struct {
		step  string
		files []file
	}{
		{"apt-config", []file{{Path: "/etc/apt/apt.conf.d/80-hermes-box-network", Data: []byte("Acquire::ForceIPv4 \"true\";"), Mode: 0o644}}},
		{"profile-env", []file{{Path: "/etc/profile.d/hermes-box.sh", Data: []byte("export HERMES_HOME=/workspace/hermes-home\n"), Mode: 0o644}}},
		{"login-shell", []file{
			{Path: "/usr/local/bin/tm", Data: []byte("exec tmux attach-session -t \"=$session\""), Mode: 0o755},
			{Path: "/etc/tmux.conf", Data: []byte("set -g default-terminal \"tmux-256color\""), Mode: 0o644},
			{Path: "/home/boxadmin/.bash_profile", Data: []byte("sudo -iu hermes env"), Mode: 0o644, UID: boxlayout.AdminUID, GID: boxlayout.AdminUID},
			{Path: "/usr/local/share/hermes-box/boxadmin.bash_profile", Data: []byte("SSH_CONNECTION"), Mode: 0o644},
		}},
		{"codex-config", []file{{Path: "/workspace/codex-home/config.toml", Data: []byte("approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\""), Mode: 0o600, UID: boxlayout.ServiceUID, GID: boxlayout.ServiceUID}}},
	}
	for _, tt := range tests {
		t.Run(tt.step, func(t *testing.T) {
			f := newFixture(t)
			f.runTwice(f.provisioner(f.config(), tt.step))
			for _, want := range tt.files {
				f.wantFile(want.Path, nil, want.Mode, want.UID, want.GID)
				got, _ := os.ReadFile(filepath.Join(f.root, want.Path))
				if !strings.Contains(string(got), string(want.Data)) {
					t.Errorf("%s lacks %q:\n%s", want.Path, want.Data, got)
				}
			}
			if n := len(f.runner.commands()); n != 0 {
				t.Errorf("file step ran commands: %v", f.runner.lines())
			}
		})
	}
}

func TestFileStepRepairsDrift(t *testing.T) {
	f := newFixture(t)
	p := f.provisioner(f.config(), "profile-env")
	f.runTwice(p)
	path := filepath.Join(f.root, "etc/profile.d/hermes-box.sh")
	if err := os.WriteFile(path, []byte("tampered"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	plan, err := p.Plan(t.Context())
	if err != nil || plan.Changed != 1 || len(plan.Steps[0].Changes) != 2 {
		t.Fatalf("plan %+v, %v; want a rewrite and a chmod", plan, err)
	}
	f.runTwice(p)
	f.wantFile("/etc/profile.d/hermes-box.sh", asset("profile.sh"), 0o644, 0, 0)
}

func TestHostsStep(t *testing.T) {
	f := newFixture(t)
	f.writeRoot("/etc/hosts", "127.0.0.1 localhost", 0o644) // no final newline
	f.runTwice(f.provisioner(f.config(), "hosts"))
	f.wantFile("/etc/hosts", []byte("127.0.0.1 localhost\n127.0.1.1 hermes-box-builder\n"), 0o644, 0, 0)

	f.writeRoot("/etc/hostname", "bad host;name\n", 0o644)
	if _, err := f.provisioner(f.config(), "hosts").Run(t.Context()); err == nil || !strings.Contains(err.Error(), `"bad host;name"`) {
		t.Fatalf("bad hostname: %v", err)
	}
}

func TestAptSteps(t *testing.T) {
	f := newFixture(t)
	f.runTwice(f.provisioner(f.config(), "apt-index", "packages"))
	got := f.runner.commands()
	if len(got) != 2 {
		t.Fatalf("commands %v; want one index refresh and one install", f.runner.lines())
	}
	wants := []struct {
		line    string
		timeout time.Duration
	}{
		{"apt-get update -o APT::Update::Error-Mode=any", 3 * time.Minute},
		{"apt-get install -y --no-install-recommends build-essential ca-certificates curl git libatomic1 libffi-dev ncurses-term openssh-server procps python3 python3-dev ripgrep sudo tmux xz-utils", 20 * time.Minute},
	}
	for i, w := range wants {
		if got[i].String() != w.line || got[i].Timeout != w.timeout || !contains(got[i].Env, "DEBIAN_FRONTEND=noninteractive") {
			t.Errorf("command %d: %q (%s, env %v); want %q (%s)", i, got[i], got[i].Timeout, got[i].Env, w.line, w.timeout)
		}
	}
	for _, forbidden := range []string{"skopeo", "supervisor"} {
		if strings.Contains(got[1].String(), forbidden) {
			t.Errorf("the package set installs %s", forbidden)
		}
	}
}

func TestAptIndexRetries(t *testing.T) {
	tests := []struct {
		name      string
		failures  int
		wantCalls int
		wantErr   string
	}{
		{"recovers on the third attempt", 2, 3, ""},
		{"gives up after six bounded attempts", 99, 6, "apt index refresh failed after 6 bounded attempts: apt-get update -o APT::Update::Error-Mode=any: exited with status 100: W: some warning\nE: Could not resolve 'ports.ubuntu.com'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			calls := 0
			f.runner.handlers["apt-get"] = func(c command.Command) (command.Output, error) {
				if c.Args[0] == "update" {
					if calls++; calls <= tt.failures {
						return command.Output{}, &command.CommandError{Command: c.String(), ExitCode: 100, Stderr: "W: some warning\nE: Could not resolve 'ports.ubuntu.com'\n"}
					}
				}
				return f.runner.system(c)
			}
			var sleeps []time.Duration
			cfg := f.config()
			cfg.Sleep = func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }
			rep, err := f.provisioner(cfg, "apt-index", "packages").Run(t.Context())
			if calls != tt.wantCalls || len(sleeps) != tt.wantCalls-1 {
				t.Errorf("%d update attempts and %d pauses; want %d and %d", calls, len(sleeps), tt.wantCalls, tt.wantCalls-1)
			}
			for _, d := range sleeps {
				if d != 5*time.Second {
					t.Errorf("paused %s between attempts; want 5s", d)
				}
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var se *StepError
			if !errors.As(err, &se) || se.Step != "apt-index" || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v; want step apt-index failing with %q", err, tt.wantErr)
			}
			if len(rep.Steps) != 1 {
				t.Errorf("the run went on after the failure: %+v", rep.Steps)
			}
			last := f.events.all()[len(f.events.all())-1]
			if last.Type != protocol.EventStep || last.State != protocol.StepFailed || last.Step != "apt-index" {
				t.Errorf("last event %+v; want the step's failure", last)
			}
		})
	}
}

func TestAccountsStep(t *testing.T) {
	f := newFixture(t)
	f.writeRoot("/etc/passwd", "root:x:0:0:root:/root:/bin/bash\nubuntu:x:1000:1000::/home/ubuntu:/bin/bash\n", 0o644)
	f.writeRoot("/etc/group", "root:x:0:\nubuntu:x:1000:\n", 0o644)
	f.writeRoot("/etc/shadow", "root:*:20000:0:99999:7:::\n", 0o640)
	f.runTwice(f.provisioner(f.config(), "accounts"))
	want := []string{
		"groupadd --gid 1001 boxadmin",
		"useradd --uid 1001 --gid 1001 --create-home --shell /bin/bash boxadmin",
		"passwd --delete boxadmin",
		"groupadd --gid 1002 hermes",
		"useradd --uid 1002 --gid 1002 --create-home --shell /bin/bash hermes",
	}
	if got := f.runner.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range f.runner.commands() {
		if c.Timeout != time.Minute {
			t.Errorf("%s: timeout %s", c, c.Timeout)
		}
	}
	shadow, _ := os.ReadFile(filepath.Join(f.root, "etc/shadow"))
	if !strings.Contains(string(shadow), "boxadmin::") || !strings.Contains(string(shadow), "hermes:!") {
		t.Errorf("shadow:\n%s\nwant boxadmin without a password and hermes locked", shadow)
	}
}

func TestAccountsLockHermesWhenUnlocked(t *testing.T) {
	f := newFixture(t)
	f.writeRoot("/etc/passwd", "boxadmin:x:1001:1001::/home/boxadmin:/bin/bash\nhermes:x:1002:1002::/home/hermes:/bin/bash\n", 0o644)
	f.writeRoot("/etc/group", "boxadmin:x:1001:\nhermes:x:1002:\n", 0o644)
	f.writeRoot("/etc/shadow", "boxadmin::1:0:99999:7:::\nhermes:$y$hash:1:0:99999:7:::\n", 0o640)
	f.runTwice(f.provisioner(f.config(), "accounts"))
	if got := f.runner.lines(); len(got) != 1 || got[0] != "passwd --lock hermes" {
		t.Fatalf("commands %v; want only the lock", got)
	}
}

func TestAccountsRefuseTakenIDs(t *testing.T) {
	tests := []struct{ name, passwd, group, want string }{
		{"uid taken", "someone:x:1002:1002::/home/x:/bin/sh\n", "", `user id 1002, needed for hermes, belongs to "someone"`},
		{"wrong uid", "hermes:x:1500:1500::/home/hermes:/bin/sh\n", "", "user hermes exists with id 1500; want 1002"},
		{"gid taken", "", "staff:x:1001:\n", `group id 1001, needed for boxadmin, belongs to "staff"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.writeRoot("/etc/passwd", tt.passwd, 0o644)
			f.writeRoot("/etc/group", tt.group, 0o644)
			_, err := f.provisioner(f.config(), "accounts").Run(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if len(f.runner.commands()) != 0 {
				t.Errorf("ran %v", f.runner.lines())
			}
		})
	}
}

func TestValidatedFilesAreCheckedBeforeTheyAreInstalled(t *testing.T) {
	tests := []struct {
		step, program, path string
		mode                os.FileMode
		data                []byte
	}{
		{"sudoers", "visudo", "/etc/sudoers.d/hermes-box", 0o440, Sudoers},
		{"sshd", "sshd", "/etc/ssh/sshd_config.d/99-hermes-box.conf", 0o644, SSHDDropIn},
	}
	for _, tt := range tests {
		t.Run(tt.step+" refused", func(t *testing.T) {
			f := newFixture(t)
			var staged []byte
			f.runner.handlers[tt.program] = func(c command.Command) (command.Output, error) {
				staged = readStaged(t, c)
				return command.Output{}, &command.CommandError{Command: c.String(), ExitCode: 1, Stderr: "syntax error near line 2"}
			}
			_, err := f.provisioner(f.config(), tt.step).Run(t.Context())
			if err == nil || !strings.Contains(err.Error(), "nothing installed") || !strings.Contains(err.Error(), "syntax error near line 2") {
				t.Fatalf("got %v", err)
			}
			if string(staged) != string(tt.data) {
				t.Errorf("the validator saw %q", staged)
			}
			ents, _ := os.ReadDir(filepath.Join(f.root, filepath.Dir(tt.path)))
			if len(ents) != 0 {
				t.Errorf("left %v behind after a refusal", ents)
			}
		})
		t.Run(tt.step+" accepted", func(t *testing.T) {
			f := newFixture(t)
			f.runner.handlers[tt.program] = func(c command.Command) (command.Output, error) {
				if c.Timeout != time.Minute {
					t.Errorf("%s: timeout %s", c, c.Timeout)
				}
				return command.Output{}, nil
			}
			f.runTwice(f.provisioner(f.config(), tt.step))
			f.wantFile(tt.path, tt.data, tt.mode, 0, 0)
			if n := len(f.runner.commands()); n != 1 {
				t.Errorf("ran %v; want one validation", f.runner.lines())
			}
		})
	}
}

// readStaged returns the file a validator command is pointed at: visudo's
// -cf argument, or the drop-in included by sshd's check config.
func readStaged(t *testing.T, c command.Command) []byte {
	t.Helper()
	target := c.Args[len(c.Args)-1]
	if filepath.Base(c.Path) == "sshd" {
		conf, err := os.ReadFile(target)
		if err != nil {
			t.Fatal(err)
		}
		first := strings.SplitN(string(conf), "\n", 2)[0]
		target = strings.TrimPrefix(first, "Include ")
	}
	b, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAuthorizedKeysStep(t *testing.T) {
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKgH0p4zqJ1NnxcZ+Wb4C4bZ0zj0Q2e0pXx9Kp2n0A7b hermes-box project key\n"
	f := newFixture(t)
	cfg := f.config()
	rep, err := f.provisioner(cfg, "authorized-keys").Run(t.Context())
	if err != nil || rep.Steps[0].State != stateSkipped {
		t.Fatalf("without keys: %+v, %v; want skipped", rep, err)
	}
	cfg.AuthorizedKeys = []byte(key)
	f.runTwice(f.provisioner(cfg, "authorized-keys"))
	f.wantFile("/home/boxadmin/.ssh/authorized_keys", []byte(key), 0o600, boxlayout.AdminUID, boxlayout.AdminUID)
	f.wantFile("/home/boxadmin/.ssh", nil, 0o700, boxlayout.AdminUID, boxlayout.AdminUID)

	cfg.AuthorizedKeys = []byte("# comment\nnot a key\n")
	if _, err := f.provisioner(cfg, "authorized-keys").Run(t.Context()); err == nil || !strings.Contains(err.Error(), "authorized keys line 2") {
		t.Fatalf("bad key: %v", err)
	}
}

func TestWorkspaceStep(t *testing.T) {
	f := newFixture(t)
	f.runTwice(f.provisioner(f.config(), "workspace"))
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{"/workspace", 0o750}, {"/workspace/hermes-home", 0o700}, {"/workspace/hermes-home/logs", 0o750},
		{"/workspace/codex-home", 0o700}, {"/workspace/codex-home/bin", 0o750}, {"/workspace/work", 0o750}} {
		f.wantFile(d.path, nil, d.mode, boxlayout.ServiceUID, boxlayout.ServiceUID)
	}
	f.wantLink("/home/hermes/.hermes", "/workspace/hermes-home")
}

func TestNodeStep(t *testing.T) {
	f := newFixture(t)
	f.runTwice(f.provisioner(f.config(), "node"))
	f.wantFile("/usr/local/lib/nodejs/node-v26/bin/node", []byte("#!/bin/sh\necho v26.99.1\n"), 0o755, 0, 0)
	f.wantFile("/usr/local/lib/nodejs/node-v26/lib/node_modules/corepack/dist/corepack.js", nil, 0o644, 0, 0)
	f.wantFile("/usr/local/lib/nodejs/node-v26", nil, 0o755, 0, 0)
	f.wantFile("/usr/local/lib/nodejs/node-v26/.hermes-box-node", []byte(nodeTarball+" sha256="+f.node.sum+"\n"), 0o644, 0, 0)
	f.wantLink("/usr/local/lib/nodejs/node-v26/bin/npm", "../lib/node_modules/npm/bin/npm-cli.js")
	for _, tool := range nodeTools {
		f.wantLink("/usr/local/bin/"+tool, "/usr/local/lib/nodejs/node-v26/bin/"+tool)
		f.wantLink("/home/hermes/.local/bin/"+tool, "/usr/local/lib/nodejs/node-v26/bin/"+tool)
	}
	if i, j := f.tl.index("GET /node/latest-v26.x/SHASUMS256.txt"), f.tl.index("GET /node/latest-v26.x/"+nodeTarball); i < 0 || j < i {
		t.Errorf("timeline %v: the checksum list must come before the tarball", f.tl.snapshot())
	}
}

func TestNodeStepRefusesAMismatchedTarball(t *testing.T) {
	f := newFixture(t)
	f.served["/node/latest-v26.x/"+nodeTarball] = []byte("not the listed tarball")
	_, err := f.provisioner(f.config(), "node").Run(t.Context())
	if !errors.Is(err, download.ErrDigestMismatch) {
		t.Fatalf("got %v, want a digest mismatch", err)
	}
	for _, p := range []string{"usr/local/lib/nodejs", "usr/local/bin/node", "var/cache/hermes-box/downloads/" + f.node.sum} {
		if ents, _ := os.ReadDir(filepath.Join(f.root, p)); len(ents) != 0 || exists(filepath.Join(f.root, p)) && !strings.HasSuffix(p, "nodejs") {
			t.Errorf("%s exists after a mismatch (%v)", p, ents)
		}
	}
}

func TestUVStep(t *testing.T) {
	f := newFixture(t)
	f.runTwice(f.provisioner(f.config(), "uv"))
	f.wantFile("/workspace/hermes-home/bin/uv", []byte("#!/bin/sh\necho uv\n"), 0o755, boxlayout.ServiceUID, boxlayout.ServiceUID)
	f.wantFile("/workspace/hermes-home/bin/uvx", nil, 0o755, boxlayout.ServiceUID, boxlayout.ServiceUID)
	cmds := f.runner.commands()
	if len(cmds) != 1 || cmds[0].Path != filepath.Join(f.root, "workspace/hermes-home/bin/uv") || cmds[0].Args[0] != "--version" {
		t.Fatalf("commands %v; want uv --version", f.runner.lines())
	}
	if get, verified, run := f.tl.index("GET /uv/uv.tar.gz"), f.tl.index("event uv: uv 0.11.21 verified"), f.tl.index("run "+cmds[0].Path); get < 0 || verified < get || run < verified {
		t.Errorf("order download %d → verify %d → install %d broken: %v", get, verified, run, f.tl.snapshot())
	}
}

func TestUVStepMismatchLeavesNothingInstalled(t *testing.T) {
	f := newFixture(t)
	f.served["/uv/uv.tar.gz"] = tartest.TarGz(t, []tartest.Entry{{Name: "uv-x/uv", Body: "evil", Mode: 0o755}})
	_, err := f.provisioner(f.config(), "uv").Run(t.Context())
	var se *StepError
	if !errors.As(err, &se) || se.Step != "uv" || !errors.Is(err, download.ErrDigestMismatch) {
		t.Fatalf("got %v, want step uv failing on a digest mismatch", err)
	}
	if exists(filepath.Join(f.root, "workspace/hermes-home/bin")) {
		ents, _ := os.ReadDir(filepath.Join(f.root, "workspace/hermes-home/bin"))
		t.Errorf("bin dir exists with %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(f.root, "var/cache/hermes-box/downloads")); len(ents) != 0 {
		t.Errorf("download cache holds %v", ents)
	}
	if len(f.runner.commands()) != 0 {
		t.Errorf("ran %v", f.runner.lines())
	}
}

func TestUVStepWrongVersionIsRemoved(t *testing.T) {
	f := newFixture(t)
	f.runner.handlers["uv"] = func(command.Command) (command.Output, error) {
		return command.Output{Stdout: []byte("uv 0.11.22\n")}, nil
	}
	_, err := f.provisioner(f.config(), "uv").Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), `printed "uv 0.11.22"; want uv 0.11.21`) {
		t.Fatalf("got %v", err)
	}
	if exists(filepath.Join(f.root, "workspace/hermes-home/bin/uv")) {
		t.Error("a uv of the wrong version stayed installed")
	}
}

// TestCodexStep: the step unpacks the standalone package of the guest's
// target from npm's tarball into its release directory, owned by hermes
// down to the directories the tarball only implies, without the voice
// resources and the npm package's own files, and links it as `codex
// update` keeps it.
func TestCodexStep(t *testing.T) {
	f := newFixture(t)
	f.runTwice(f.provisioner(f.config(), "workspace", "codex"))
	rel := "/workspace/codex-home/packages/standalone/releases/0.171.0-aarch64-unknown-linux-musl"
	f.wantFile(rel+"/bin/codex", []byte("#!/bin/sh\necho codex-cli 0.171.0\n"), 0o755, boxlayout.ServiceUID, boxlayout.ServiceUID)
	f.wantFile(rel+"/codex-package.json", []byte(codexManifestJSON(codexArm64)), 0o644, boxlayout.ServiceUID, boxlayout.ServiceUID)
	for _, exe := range []string{"bin/codex-code-mode-host", "codex-path/rg", "codex-resources/bwrap"} {
		f.wantFile(rel+"/"+exe, nil, 0o755, boxlayout.ServiceUID, boxlayout.ServiceUID)
	}
	for _, d := range []string{"", "/bin", "/codex-path", "/codex-resources"} {
		f.wantFile(rel+d, nil, 0o755, boxlayout.ServiceUID, boxlayout.ServiceUID)
	}
	for _, never := range []string{"codex-resources/voice", "package.json", "README.md", "package", "vendor"} {
		if exists(filepath.Join(f.root, rel, never)) {
			t.Errorf("the release holds %s", never)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(f.root, "workspace/codex-home/packages/standalone/releases")); len(ents) != 1 {
		t.Errorf("releases holds %v; want the release alone", ents)
	}
	f.wantLink("/workspace/codex-home/packages/standalone/current", "releases/0.171.0-aarch64-unknown-linux-musl")
	f.wantLink("/workspace/codex-home/bin/codex", "../packages/standalone/current/bin/codex")
	if b, err := os.ReadFile(filepath.Join(f.root, "workspace/codex-home/bin/codex")); err != nil || !strings.Contains(string(b), "codex-cli") {
		t.Errorf("bin/codex does not resolve: %v", err)
	}
}

// TestCodexSkip: of npm's tarball only the standalone package of the
// guest's target is unpacked, less its voice resources.
func TestCodexSkip(t *testing.T) {
	pkg := "package/vendor/aarch64-unknown-linux-musl"
	tests := []struct {
		rel  string
		skip bool
	}{
		{"package", false},
		{"package/vendor", false},
		{pkg, false},
		{pkg + "/codex-package.json", false},
		{pkg + "/bin/codex", false},
		{pkg + "/bin/codex-code-mode-host", false},
		{pkg + "/codex-path/rg", false},
		{pkg + "/codex-resources", false},
		{pkg + "/codex-resources/bwrap", false},
		{pkg + "/codex-resources/voice", true},
		{pkg + "/codex-resources/voice/lib/libopus.so.0", true},
		{pkg + "/codex-resources/voicemail", false},
		{"package/package.json", true},
		{"package/README.md", true},
		{"package/vendor/x86_64-unknown-linux-musl/bin/codex", true},
		{"package/vendor/aarch64-unknown-linux-musl-other/bin/codex", true},
		{"other/bin/codex", true},
	}
	skip := codexSkip("aarch64-unknown-linux-musl")
	for _, tt := range tests {
		if got := skip(tt.rel); got != tt.skip {
			t.Errorf("skip(%q) = %v, want %v", tt.rel, got, tt.skip)
		}
	}
}

// TestCodexStepRefusesBadArchives: a tarball that is not the pinned one,
// one whose names or links lead out of the staging directory (even where
// the install would skip the entry), another target's, and one whose
// manifest is missing or names another release or an entrypoint outside
// the package are refused, with nothing installed and nothing written
// outside.
func TestCodexStepRefusesBadArchives(t *testing.T) {
	pkg := "package/vendor/" + codexArm64 + "/"
	good := codexManifestJSON(codexArm64)
	with := func(extra ...tartest.Entry) []tartest.Entry { return append(codexTarball(codexArm64, good), extra...) }
	tests := []struct {
		name    string
		entries []tartest.Entry
		digest  string // "" pins the served tarball's own
		wantErr error
		want    string
	}{
		{name: "wrong digest", entries: codexTarball(codexArm64, good), digest: strings.Repeat("0", 64),
			wantErr: download.ErrDigestMismatch, want: "fetching codex 0.171.0-aarch64-unknown-linux-musl"},
		{name: "dot-dot name inside the package", entries: with(tartest.File(pkg+"bin/../../../../../escaped", "x")),
			wantErr: tarfs.ErrUnsafe},
		{name: "dot-dot name the install would skip", entries: with(tartest.File("../escaped", "x")), wantErr: tarfs.ErrUnsafe},
		{name: "absolute name", entries: with(tartest.File("/escaped", "x")), wantErr: tarfs.ErrUnsafe},
		{name: "link out of the staging directory", entries: with(tartest.Symlink(pkg+"codex-path/escaped", "../../../../../escaped")),
			wantErr: tarfs.ErrUnsafe},
		{name: "absolute link", entries: with(tartest.Symlink(pkg+"codex-path/escaped", "/escaped")), wantErr: tarfs.ErrUnsafe},
		{name: "another target's tarball", entries: codexTarball("x86_64-unknown-linux-musl", codexManifestJSON("x86_64-unknown-linux-musl")),
			want: "the Codex archive has no package/vendor/aarch64-unknown-linux-musl/"},
		{name: "wrong version", entries: codexTarball(codexArm64, `{"version":"0.170.0","target":"aarch64-unknown-linux-musl"}`),
			want: `version/target is "0.170.0"/"aarch64-unknown-linux-musl"`},
		{name: "wrong target", entries: codexTarball(codexArm64, `{"version":"0.171.0","target":"x86_64-unknown-linux-musl"}`),
			want: `want "0.171.0"/"aarch64-unknown-linux-musl"`},
		{name: "escaping entrypoint", entries: codexTarball(codexArm64, `{"version":"0.171.0","target":"aarch64-unknown-linux-musl","entrypoint":"../../x"}`),
			want: "leaves the package"},
		{name: "no manifest", entries: codexTarball(codexArm64, ""), want: "reading codex-package.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			a := newArtifact(tartest.TarGz(t, tt.entries))
			f.served["/codex/codex.tar.gz"] = a.body
			cfg := f.config()
			cfg.Pins.Codex.SHA256 = a.sum
			if tt.digest != "" {
				cfg.Pins.Codex.SHA256 = tt.digest
			}
			_, err := f.provisioner(cfg, "workspace", "codex").Run(t.Context())
			if err == nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want %v containing %q", err, tt.wantErr, tt.want)
			}
			releases := filepath.Join(f.root, "workspace/codex-home/packages/standalone/releases")
			if ents, _ := os.ReadDir(releases); len(ents) != 0 {
				t.Errorf("releases holds %v after a refused package", ents)
			}
			for _, d := range []string{"", "workspace/codex-home/packages/standalone", "workspace/codex-home/packages"} {
				if exists(filepath.Join(f.root, d, "escaped")) {
					t.Errorf("the archive wrote %s", filepath.Join(d, "escaped"))
				}
			}
			if exists(filepath.Join(f.root, "workspace/codex-home/packages/standalone/current")) {
				t.Error("current was linked to a refused package")
			}
		})
	}
}

func TestHermesEnvStep(t *testing.T) {
	f := newFixture(t)
	f.writeRoot("/workspace/hermes-home/.env", "OPENAI_API_KEY=sk-secret", 0o644)
	f.runTwice(f.provisioner(f.config(), "hermes-env"))
	f.wantFile("/workspace/hermes-home/.env", []byte("OPENAI_API_KEY=sk-secret\nHERMES_CODEX_EVENT_STALE_TIMEOUT_SECONDS=120\n"), 0o600, boxlayout.ServiceUID, boxlayout.ServiceUID)
	for _, ev := range f.events.all() {
		if strings.Contains(ev.Message, "sk-secret") || strings.Contains(strings.Join(mapValues(ev.Fields), " "), "sk-secret") {
			t.Errorf("an event carries the secret: %+v", ev)
		}
	}
	// A value the user set is kept.
	f.writeRoot("/workspace/hermes-home/.env", "HERMES_CODEX_EVENT_STALE_TIMEOUT_SECONDS=300\n", 0o600)
	if _, err := f.provisioner(f.config(), "hermes-env").Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.wantFile("/workspace/hermes-home/.env", []byte("HERMES_CODEX_EVENT_STALE_TIMEOUT_SECONDS=300\n"), 0o600, boxlayout.ServiceUID, boxlayout.ServiceUID)
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestGateStepIsAHook(t *testing.T) {
	f := newFixture(t)
	rep, err := f.provisioner(f.config(), "gated-approval").Run(t.Context())
	if err != nil || rep.Steps[0].State != stateSkipped || rep.Steps[0].Reason != GateMissing {
		t.Fatalf("without a patcher: %+v, %v", rep, err)
	}
	var skipped bool
	for _, ev := range f.events.all() {
		skipped = skipped || ev.State == protocol.StepSkipped && ev.Step == "gated-approval" && ev.Message == GateMissing
	}
	if !skipped {
		t.Error("no skipped event names the missing patch")
	}
	gate := &fakeGate{pending: []string{"patch tools/approval.py"}}
	cfg := f.config()
	cfg.Gate = gate
	f.runTwice(f.provisioner(cfg, "gated-approval"))
	if gate.applied != 1 || gate.target.Source != boxlayout.HermesTree || gate.target.Root != f.root || gate.target.Commit != f.pins.HermesCommit {
		t.Errorf("patcher applied %d times with %+v", gate.applied, gate.target)
	}
}

type fakeGate struct {
	pending   []string
	applied   int
	target    GateTarget
	checkedAs []string
}

func (g *fakeGate) Pending(_ context.Context, t GateTarget) ([]string, error) {
	g.target = t
	if g.applied > 0 {
		return nil, nil
	}
	return g.pending, nil
}

func (g *fakeGate) Apply(_ context.Context, t GateTarget) error {
	g.applied++
	return nil
}

func (g *fakeGate) Check(_ context.Context, t GateTarget) error {
	g.checkedAs = append(g.checkedAs, t.User)
	return nil
}

func TestFinalizeStep(t *testing.T) {
	f := newFixture(t)
	f.writeRoot("/etc/ssh/ssh_host_ed25519_key", "k", 0o600)
	f.writeRoot("/etc/ssh/ssh_host_ed25519_key.pub", "k", 0o644)
	f.writeRoot("/etc/ssh/sshd_config", "# keep", 0o644)
	f.writeRoot("/var/lib/apt/lists/ports.ubuntu.com_dists_noble_InRelease", "x", 0o644)
	f.writeRoot("/var/lib/apt/lists/partial/x", "x", 0o644)
	f.runTwice(f.provisioner(f.config(), "finalize"))
	ents, _ := os.ReadDir(filepath.Join(f.root, "etc/ssh"))
	if len(ents) != 1 || ents[0].Name() != "sshd_config" {
		t.Errorf("/etc/ssh holds %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(f.root, "var/lib/apt/lists")); len(ents) != 0 {
		t.Errorf("apt lists hold %v", ents)
	}
}

// TestCleanupGivesTheVenvToRoot: a file the hermes user owns in Hermes'
// venv, or one others may write (a .pth in site-packages runs in every
// Hermes process), is pending, and cleanup makes the venv root's and
// writable by root alone; the homes stay hermes'.
func TestCleanupGivesTheVenvToRoot(t *testing.T) {
	f := newFixture(t)
	p := f.provisioner(f.config())
	site := "/usr/local/lib/hermes-agent/venv/lib/python3.11/site-packages"
	pth := site + "/evil.pth"
	for _, c := range []struct {
		name string
		set  func(path string)
	}{
		{"owned by hermes", func(path string) { mustDo(t, f.owner.Lchown(path, boxlayout.ServiceUID, boxlayout.ServiceUID)) }},
		{"writable by others", func(path string) { mustDo(t, os.Chmod(path, 0o666)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustDo(t, os.MkdirAll(filepath.Join(f.root, site), 0o755))
			mustDo(t, os.WriteFile(filepath.Join(f.root, pth), []byte("import os\n"), 0o644))
			mustDo(t, os.MkdirAll(filepath.Join(f.root, boxlayout.HermesHome), 0o755))
			for _, d := range []string{"/usr/local/lib/hermes-agent/venv", "/usr/local/lib/hermes-agent/venv/lib", "/usr/local/lib/hermes-agent/venv/lib/python3.11", site, pth} {
				mustDo(t, f.owner.Lchown(filepath.Join(f.root, d), rootID, rootID))
			}
			mustDo(t, applyCleanup(t.Context(), p))
			c.set(filepath.Join(f.root, pth))
			st, err := checkCleanup(t.Context(), p)
			if err != nil || len(st.Pending) != 1 || !strings.Contains(st.Pending[0], "chown -R root:root "+boxlayout.HermesVenv) || !strings.Contains(st.Pending[0], "evil.pth") {
				t.Fatalf("pending %q, %v", st.Pending, err)
			}
			mustDo(t, applyCleanup(t.Context(), p))
			f.wantFile(pth, nil, 0o644, rootID, rootID)
			f.wantFile(boxlayout.HermesHome, nil, 0o755, boxlayout.ServiceUID, boxlayout.ServiceUID)
			if st, err := checkCleanup(t.Context(), p); err != nil || len(st.Pending) != 0 {
				t.Fatalf("after cleanup: pending %q, %v", st.Pending, err)
			}
		})
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSmokeChecksTheGateAsHermes: the smoke step runs the gate check as
// the box's health verb will (as hermes, once cleanup handed it its home),
// so that check's verdict is kept for the box's first health check.
func TestSmokeChecksTheGateAsHermes(t *testing.T) {
	f := newFixture(t)
	gate := &fakeGate{}
	cfg := f.config()
	cfg.Gate = gate
	f.runTwice(f.provisioner(cfg, "smoke"))
	if !slices.Equal(gate.checkedAs, []string{boxlayout.ServiceUser}) {
		t.Fatalf("smoke checked the gate as %q, want once as %s", gate.checkedAs, boxlayout.ServiceUser)
	}
}
