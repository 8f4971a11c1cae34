package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// The tests of issue 18's items, through the real binary, the fake smolvm
// and Debian's sshd.

// runIn runs hermes-box (the binary at exe) in dir with the harness's
// environment minus HERMES_BOX_PROJECT_ROOT, as a user following the
// README would.
func (h *harness) runIn(dir, exe string, args ...string) result {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	for _, kv := range append(append([]string(nil), h.Env...), h.Extra...) {
		if !strings.HasPrefix(kv, "HERMES_BOX_PROJECT_ROOT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		h.T.Fatalf("running %s %v: %v", exe, args, err)
	}
	return r
}

// sh runs a command line of the README (argv, no shell) in dir.
func sh(t *testing.T, dir string, argv ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out)
	}
	return string(out)
}

// Item 1: a portable package, unpacked into a fresh directory, restores
// there with only the steps of docs/backups.md ("Portable packages"); the
// restoring host's checks run before anything is created.
func TestPortablePackageRestoresInFreshDirectory(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Write("bin/hermes-box", boxtest.ReadFile(t, bins.hermesBox))
	boxtest.Must(t, os.Chmod(filepath.Join(h.Root, "bin", "hermes-box"), 0o755))
	h.Write("secret-env.txt", "OPENAI_API_KEY=HBX_TEST_PORTABLE_SECRET\n")
	// The README and the internals it links.
	h.Write("README.md", "see [backups](docs/backups.md)\n")
	h.Write("docs/backups.md", "# Backups\n")
	h.Extra = []string{"HBX_TEST_PORTABLE_SECRET=sk-portable"}
	mustRun(t, h, "init")
	h.WriteNote("carried over\n")
	r := mustRun(t, h, "package", "move")
	archive := strings.TrimSpace(r.stdout)
	if !strings.Contains(r.stderr, "holds the project's SSH private key") {
		t.Errorf("package did not warn about the key:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "[package] done: ") || !strings.Contains(r.stderr, "[stage rootfs.tar.gz] done: ") {
		t.Errorf("package did not report its transfers:\n%s", r.stderr)
	}
	// The other host: the original box is gone.
	mustRun(t, h, "destroy", "--force")

	fresh := t.TempDir()
	boxtest.Must(t, os.Rename(archive, filepath.Join(fresh, filepath.Base(archive))))
	boxtest.Must(t, os.Rename(archive+".sha256", filepath.Join(fresh, filepath.Base(archive)+".sha256")))
	// docs/backups.md: check, unpack, cd hermes-box, bin/hermes-box restore backups/….
	sh(t, fresh, "sha256sum", "-c", filepath.Base(archive)+".sha256")
	sh(t, fresh, "tar", "-xf", filepath.Base(archive))
	proj := filepath.Join(fresh, "hermes-box")
	for _, f := range []string{"state/hermes-box-ed25519", "state/hermes-box-ed25519.pub", "PORTABLE.md", "portable.json", "secret-env.txt", "bin/hermes-box", "Smolfile", "README.md", "docs/backups.md"} {
		if _, err := os.Stat(filepath.Join(proj, f)); err != nil {
			t.Errorf("the package lacks %s: %v", f, err)
		}
	}
	notes := string(boxtest.ReadFile(t, filepath.Join(proj, "PORTABLE.md")))
	if !strings.Contains(notes, "WARNING: this package holds the project's SSH private key") || !strings.Contains(notes, "HBX_TEST_PORTABLE_SECRET") {
		t.Errorf("PORTABLE.md:\n%s", notes)
	}
	var info struct {
		Backup        string   `json:"backup"`
		HostVariables []string `json:"hostVariables"`
	}
	boxtest.Must(t, json.Unmarshal(boxtest.ReadFile(t, filepath.Join(proj, "portable.json")), &info))
	backupDir := filepath.Join("backups", info.Backup)

	// The restoring host's checks: an unset mapped variable stops the
	// restore before any machine exists.
	h.Extra = nil
	before := len(h.Calls())
	r = h.runIn(proj, filepath.Join(proj, "bin", "hermes-box"), "restore", backupDir)
	if r.code != 1 || !strings.Contains(r.stderr, "restore preflight (this host)") || !strings.Contains(r.stderr, `"HBX_TEST_PORTABLE_SECRET"`) {
		t.Fatalf("restore without the mapped variable: %d\n%s", r.code, r.stderr)
	}
	if i := boxtest.Index(h.Calls()[before:], `^machine create --name`); i >= 0 {
		t.Fatalf("a machine was created before the host checks passed")
	}
	// An unsupported smolvm on this host: refused the same way.
	h.Extra = []string{"HBX_TEST_PORTABLE_SECRET=sk-portable", "FAKESMOLVM_VERSION=1.2.3"}
	r = h.runIn(proj, filepath.Join(proj, "bin", "hermes-box"), "restore", backupDir)
	if r.code != 1 || !strings.Contains(r.stderr, "restore preflight (this host)") || !strings.Contains(r.stderr, "smolvm 1.2.3 is not a release hermes-box supports") {
		t.Fatalf("restore with an unsupported smolvm: %d\n%s", r.code, r.stderr)
	}
	if i := boxtest.Index(h.Calls()[before:], `^machine create --name`); i >= 0 {
		t.Fatalf("a machine was created before the host checks passed")
	}
	h.Extra = []string{"HBX_TEST_PORTABLE_SECRET=sk-portable"}
	r = h.runIn(proj, filepath.Join(proj, "bin", "hermes-box"), "restore", backupDir)
	if r.code != 0 {
		t.Fatalf("restore in the fresh directory: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "[restore hermes-box] done: ") {
		t.Errorf("restore did not report its transfer:\n%s", r.stderr)
	}
	// The package brought the key that signed its backup: restore names
	// that signer and says to restore only packages you made.
	if finger := manifestField(t, filepath.Join(proj, backupDir), "ssh_key_fingerprint"); !strings.Contains(r.stderr, "whose key ("+finger+") signed the backup") ||
		!strings.Contains(r.stderr, "restore only packages you made") {
		t.Errorf("restore of a package does not name its signer:\n%s", r.stderr)
	}
	if got := h.ReadNote(); got != "carried over\n" {
		t.Errorf("note after the portable restore = %q", got)
	}
	r = h.runIn(proj, filepath.Join(proj, "bin", "hermes-box"), "status")
	if r.code != 0 || !strings.Contains(r.stdout, "healthy") {
		t.Errorf("status in the fresh directory: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustRunIn(t, h, proj, "stop")
}

func mustRunIn(t *testing.T, h *harness, dir string, args ...string) result {
	t.Helper()
	r := h.runIn(dir, filepath.Join(dir, "bin", "hermes-box"), args...)
	if r.code != 0 {
		t.Fatalf("hermes-box %v in %s: %d\n%s%s", args, dir, r.code, r.stdout, r.stderr)
	}
	return r
}

// Item 2: with the Executor enabled after init, start and restart refuse
// before anything stops, and say exactly what to run.
func TestExecutorEnabledOnExistingBox(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	h.Extra = []string{"HERMES_BOX_EXECUTOR_ENABLED=true"}
	for _, verb := range []string{"restart", "start"} {
		r := h.run(verb)
		if r.code != 1 || !strings.Contains(r.stderr, "was created without the Executor") ||
			!strings.Contains(r.stderr, "next: either set HERMES_BOX_EXECUTOR_ENABLED=false") ||
			!strings.Contains(r.stderr, "hermes-box snapshot before-executor && hermes-box destroy --force && hermes-box init") {
			t.Fatalf("%s: %d\n%s", verb, r.code, r.stderr)
		}
		if i := boxtest.Index(r.calls, `^machine (stop|start|delete)`); i >= 0 {
			t.Fatalf("%s changed the machine: %s", verb, r.calls[i].Line)
		}
		if st := h.Machines()[boxtest.Machine]; st != "running" {
			t.Fatalf("after %s's hint the box is %q, want running", verb, st)
		}
	}
	h.Extra = nil
	mustRun(t, h, "stop")
}

// Item 3: smolvm missing says which version is supported and how to
// install it.
func TestSmolvmMissing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Extra = []string{"PATH=" + t.TempDir()}
	r := h.run("init")
	if r.code != 1 || !strings.Contains(r.stderr, "a supported smolvm is required (supported: "+pins.SmolvmTableVersions()+")") ||
		!strings.Contains(r.stderr, "next: install one: "+pins.SmolvmInstallCommand(pins.SmolvmRecommended)) {
		t.Fatalf("init without smolvm: %d\n%s", r.code, r.stderr)
	}
	// A release outside the table: the table and the install command.
	h.Extra = []string{"FAKESMOLVM_VERSION=1.2.3"}
	r = h.run("init")
	if r.code != 1 || !strings.Contains(r.stderr, "smolvm 1.2.3 is not a release hermes-box supports") ||
		!strings.Contains(r.stderr, "next: install smolvm "+pins.SmolvmRecommended+": "+pins.SmolvmInstallCommand(pins.SmolvmRecommended)) {
		t.Fatalf("init with smolvm 1.2.3: %d\n%s", r.code, r.stderr)
	}
	for _, c := range r.calls {
		if c.Line != "--version" {
			t.Errorf("smolvm was asked more than its version: %v", boxtest.Lines(r.calls))
		}
	}
}

// Items 4, 6: snapshot reports its transfers and the backup's size;
// backups lists and deletes; reserved labels are refused.
func TestSnapshotProgressAndBackups(t *testing.T) {
	t.Parallel()
	h := newHarness(t, v2Snapshots) // a v2 part's transfer events and size
	initBox(t, h)
	if r := h.run("snapshot", "list"); r.code != 2 || !strings.Contains(r.stderr, `"list" is a reserved word`) || len(r.calls) != 0 {
		t.Fatalf("snapshot list: %d %v\n%s", r.code, boxtest.Lines(r.calls), r.stderr)
	}
	r := mustRun(t, h, "--log-format", "json", "snapshot", "one")
	first := strings.TrimSpace(r.stdout)
	var sawProgress, sawDone bool
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var ev struct {
			Type, Step, State string
			Fields            map[string]string
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("stderr line is not a JSON event: %q", l)
		}
		if ev.Step == "snapshot rootfs" && ev.State == "done" && ev.Fields["bytes"] != "" && ev.Fields["rate"] != "" && ev.Fields["elapsed"] != "" {
			sawDone = true
		}
		if ev.Type == "progress" || ev.Step == "snapshot workspace" {
			sawProgress = true
		}
	}
	if !sawDone || !sawProgress {
		t.Errorf("snapshot's JSON events lack the transfers:\n%s", r.stderr)
	}
	r = mustRun(t, h, "snapshot", "two")
	if !strings.Contains(r.stderr, "[snapshot rootfs] done: ") || !strings.Contains(r.stderr, "backup "+filepath.Base(strings.TrimSpace(r.stdout))+": ") {
		t.Errorf("snapshot's text lacks the transfers or the size:\n%s", r.stderr)
	}
	second := strings.TrimSpace(r.stdout)

	r = mustRun(t, h, "backups", "--json", "--verify")
	var entries []struct {
		Name, Label, Machine, Verified string
		Size                           int64
		Created                        time.Time
	}
	boxtest.Must(t, json.Unmarshal([]byte(r.stdout), &entries))
	if len(entries) != 2 || entries[0].Label != "one" || entries[1].Label != "two" || entries[0].Machine != boxtest.Machine ||
		entries[0].Verified != "verified" || entries[0].Size <= 0 || entries[0].Created.IsZero() {
		t.Fatalf("backups --json: %+v", entries)
	}
	r = mustRun(t, h, "backups")
	if !strings.Contains(r.stdout, "NAME") || !strings.Contains(r.stdout, filepath.Base(first)) || !strings.Contains(r.stdout, "complete") {
		t.Errorf("backups:\n%s", r.stdout)
	}
	mustRun(t, h, "backups", "delete", filepath.Base(first))
	if r := h.run("backups", "delete", filepath.Base(second)); r.code != 1 || !strings.Contains(r.stderr, "last good backup") {
		t.Fatalf("deleting the last good backup: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(second); err != nil {
		t.Fatal("the refused delete removed the backup")
	}
	mustRun(t, h, "backups", "delete", "--force", filepath.Base(second))
	if r := mustRun(t, h, "backups"); !strings.Contains(r.stdout, "no backups") {
		t.Errorf("backups after deleting both:\n%s", r.stdout)
	}
	mustRun(t, h, "stop")
}

// Item 5: steps carry their time, init its step count and total; a failed
// builder step says re-running init is safe; --keep-builder keeps it.
func TestInitTimesAndBuilderFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Extra = []string{"FAKESMOLVM_FAIL=machine cp@hermes-builder"}
	r := h.run("init", "--keep-builder")
	if r.code != 1 || !strings.Contains(r.stderr, "next: inspect it with smolvm machine shell --name hermes-builder") ||
		!strings.Contains(r.stderr, "kept the failed builder hermes-builder") {
		t.Fatalf("init --keep-builder: %d\n%s", r.code, r.stderr)
	}
	if st, ok := h.Machines()[boxtest.Builder]; !ok {
		t.Fatalf("the builder was not kept (%q)", st)
	}
	mustRun(t, h, "destroy", "--force")
	r = h.run("init")
	if r.code != 1 || !strings.Contains(r.stderr, "next: re-run hermes-box init: it is safe") {
		t.Fatalf("init with a failing builder step: %d\n%s", r.code, r.stderr)
	}
	if _, ok := h.Machines()[boxtest.Builder]; ok {
		t.Fatal("the builder was kept without --keep-builder")
	}
	h.Extra = nil
	r = initBox(t, h)
	for _, want := range []string{"[builder-create] done (", "[provision] done (", "init: "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("init's output lacks %q:\n%s", want, r.stderr)
		}
	}
	if !regexpMatch(`init: \d+ steps in [0-9.]+(ms|s)`, r.stderr) {
		t.Errorf("init does not end with its step count and time:\n%s", r.stderr)
	}
	mustRun(t, h, "stop")
}

// Item 7: status states, exit statuses and the one-line view.
func TestStatusStatesAndExitCodes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.run("status")
	if r.code != 4 || !strings.Contains(r.stdout, "missing") || !strings.Contains(r.stdout, "hermes-box init") {
		t.Fatalf("status before init: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	initBox(t, h)
	r = h.run("status")
	if r.code != 0 || !regexpMatch(`(?m)^hermes-box\s+healthy\s+4\s+8192 MiB\s+127\.0\.0\.1:\d+\s+full\s+\S+$`, r.stdout) {
		t.Fatalf("status of a healthy box: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustRun(t, h, "stop")
	r = h.run("status")
	if r.code != 3 || !regexpMatch(`(?m)^hermes-box\s+stopped\s`, r.stdout) || strings.Contains(r.stdout, "unhealthy") {
		t.Fatalf("status of a stopped box: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = h.run("status", "--json")
	var st struct{ State string }
	boxtest.Must(t, json.Unmarshal([]byte(r.stdout), &st))
	if r.code != 3 || st.State != "stopped" {
		t.Fatalf("status --json of a stopped box: %d %q", r.code, st.State)
	}
}

// Items 8, 11: errors once, one prefix, a next step; JSON error events;
// "destroyed" only when something was; "run hermes-box init first".
func TestErrorsAndBeforeInit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, args := range [][]string{{"start"}, {"stop"}, {"restart"}, {"ssh", "true"}, {"logs"}, {"snapshot"}, {"package"}, {"audit"}, {"shell"}} {
		r := h.run(args...)
		if r.code == 0 || !strings.Contains(r.stderr, "hermes-box init first") || strings.Contains(r.stderr, "reading the SSH public key") {
			t.Errorf("%v before init: %d\n%s", args, r.code, r.stderr)
		}
		if n := strings.Count(r.stderr, "hermes-box: "); n != 1 || strings.Contains(r.stderr, "level=") {
			t.Errorf("%v: the error is not printed once with one prefix:\n%s", args, r.stderr)
		}
	}
	// The harness's sshd made the key; a new user has none.
	key := filepath.Join(h.Root, "state", "hermes-box-ed25519")
	boxtest.Must(t, os.Rename(key+".pub", key+".pub.away"))
	h.Extra = []string{"HERMES_BOX_EXECUTOR_ENABLED=true"}
	for _, args := range [][]string{{"executor", "open"}, {"executor", "logs"}, {"executor", "tools"}, {"executor", "mcp-test"}, {"executor", "connections"}, {"executor", "connect-hermes"}} {
		if r := h.run(args...); r.code != 4 || !strings.Contains(r.stderr, "hermes-box init first") {
			t.Errorf("%v before init: %d\n%s", args, r.code, r.stderr)
		}
	}
	h.Extra = nil
	r := h.run("restore", filepath.Join(h.Root, "backups", "x.hermesbox"))
	if r.code == 0 || !strings.Contains(r.stderr, "restore needs the SSH key the backup was made with") {
		t.Errorf("restore without a key: %d\n%s", r.code, r.stderr)
	}
	if r := h.run("snapshot"); r.code != 4 || !strings.Contains(r.stderr, "hermes-box init first") {
		t.Errorf("snapshot without a key: %d\n%s", r.code, r.stderr)
	}
	boxtest.Must(t, os.Rename(key+".pub.away", key+".pub"))
	r = h.run("destroy", "--force")
	if r.code != 0 || strings.Contains(r.stdout, "destroyed") || !strings.Contains(r.stdout, "nothing to destroy") {
		t.Errorf("destroy of nothing: %d\n%s", r.code, r.stdout)
	}
	r = h.run("--log-format", "json", "start")
	var ev struct {
		Level, Message string
		Fields         map[string]string
	}
	l := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if err := json.Unmarshal([]byte(l[len(l)-1]), &ev); err != nil || ev.Level != "error" || !strings.Contains(ev.Message, "does not exist") {
		t.Fatalf("the final error under --log-format json is not an event: %v\n%s", err, r.stderr)
	}
	if r := h.run("destroy"); r.code != 2 || strings.Count(r.stderr, "hermes-box: ") != 1 {
		t.Errorf("destroy without --force: %d %s", r.code, r.stderr)
	}
	if r := h.run("frobnicate"); r.code != 2 {
		t.Errorf("unknown command: %d", r.code)
	}
}

// Item 9: Examples in every help, --version, version --json, help
// exit-codes, executor auth status --json.
func TestHelpVersionAndExitCodes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var walk func(path []string)
	walk = func(path []string) {
		r := h.run(append(path, "--help")...)
		if r.code != 0 || !strings.Contains(r.stdout, "Examples:\n") {
			t.Errorf("%v --help: %d, no Examples:\n%s", path, r.code, r.stdout)
		}
		sub := false
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "Available Commands:") {
				sub = true
				continue
			}
			if sub {
				f := strings.Fields(l)
				if len(f) == 0 {
					sub = false
					continue
				}
				if f[0] != "help" {
					walk(append(slices.Clone(path), f[0]))
				}
			}
		}
	}
	walk(nil)
	r := h.run("--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "hermes-box ") || !strings.Contains(r.stdout, "smolvm 1.0.4") {
		t.Errorf("--version: %d %q", r.code, r.stdout)
	}
	r = h.run("version", "--json")
	// .smolvm is one string, the release to install (`jq -r .smolvm`);
	// .smolvmSupported the table.
	var v struct {
		Version         string
		Smolvm          string
		SmolvmSupported []string
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil || v.Smolvm != pins.SmolvmRecommended ||
		!slices.Contains(v.SmolvmSupported, "1.0.4") || v.Version == "" {
		t.Errorf("version --json: %d %v %q", r.code, err, r.stdout)
	}
	if r := h.run("help", "nosuch"); r.code != 2 || !strings.Contains(r.stderr, `there is no help topic "nosuch"`) {
		t.Errorf("help of an unknown topic: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = h.run("help", "exit-codes")
	for _, want := range []string{"0    success", "2    bad usage", "3    status: the box is stopped", "130  interrupted"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("help exit-codes lacks %q: %d\n%s", want, r.code, r.stdout)
		}
	}
	r = h.run("executor", "auth", "status", "--json")
	var a struct {
		Stored *bool  `json:"stored"`
		Store  string `json:"store"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &a); r.code != 0 || err != nil || a.Stored == nil || a.Store != "os-keyring" {
		t.Errorf("executor auth status --json: %d %v %q %s", r.code, err, r.stdout, r.stderr)
	}
}

// Item 9 (agent): every verb's --help exits 0 without an error event,
// through the real agent binary.
func TestAgentVerbHelp(t *testing.T) {
	t.Parallel()
	buildBinaries(t)
	for _, verb := range []string{"health", "provision", "services", "snapshot", "logs", "relay", "version", "executor", "audit"} {
		cmd := exec.CommandContext(t.Context(), bins.Agent, verb, "--help")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "usage: hermes-box-agent "+verb) || strings.Contains(string(out), `"level":"error"`) {
			t.Errorf("agent %s --help: %v\n%s", verb, err, out)
		}
	}
}

// Item 10: logs lists the services when given an unknown one; completion
// offers the services and the --log-format values.
func TestLogsServicesAndCompletion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	r := h.run("logs", "nosuch")
	if r.code != 2 || !strings.Contains(r.stderr, `unknown service "nosuch": the box's services are sshd, hermes`) {
		t.Fatalf("logs nosuch: %d\n%s", r.code, r.stderr)
	}
	r = h.run("__complete", "logs", "")
	if r.code != 0 || !strings.Contains(r.stdout, "sshd\nhermes\n") {
		t.Errorf("service completion: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = h.run("__complete", "--log-format", "")
	if r.code != 0 || !strings.Contains(r.stdout, "text\njson\n") {
		t.Errorf("--log-format completion: %d %q", r.code, r.stdout)
	}
	for _, args := range [][]string{{"logs", "--help"}, {"executor", "logs", "--help"}} {
		if r := h.run(args...); !strings.Contains(r.stdout, "number of lines to show (default 100)") {
			t.Errorf("%v: -n default is not 100:\n%s", args, r.stdout)
		}
	}
	mustRun(t, h, "stop")
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

// Item 8 for a failing agent verb: the agent's error is printed once, as
// the host's final error with one prefix, not also as a relayed line; under
// --log-format json it is the one error event, the last line.
func TestAgentErrorPrintedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	initBox(t, h)
	gatewayLog := filepath.Join(h.State, "machines", boxtest.Machine, "root", "workspace", "hermes-home", "logs", "hermes-gateway.log")
	boxtest.Must(t, os.Remove(gatewayLog))
	const cause = "hermes-gateway.log: no such file or directory"
	r := h.run("logs", "hermes")
	if r.code != 1 || strings.Count(r.stderr, cause) != 1 || strings.Count(r.stderr, "hermes-box: ") != 1 ||
		!strings.HasPrefix(r.stderr, "hermes-box: logs hermes: open ") || !strings.Contains(r.stderr, "(agent logs exited with status 1)") ||
		strings.Contains(r.stderr, "error: ") {
		t.Errorf("a failing agent verb: %d\n%s", r.code, r.stderr)
	}
	r = h.run("--log-format", "json", "logs", "hermes")
	evs := jsonEvents(t, r.stderr)
	errs := 0
	for _, ev := range evs {
		if ev.Level == "error" {
			errs++
		}
	}
	if last := evs[len(evs)-1]; r.code != 1 || errs != 1 || last.Level != "error" || !strings.Contains(last.Message, cause) ||
		strings.Count(r.stderr, cause) != 1 {
		t.Errorf("a failing agent verb under --log-format json: %d\n%s", r.code, r.stderr)
	}
	mustRun(t, h, "stop")

	// A failed provision step: its reason once, in the final error, with
	// the next step; the step's JSON event keeps it in its fields.
	h = newHarness(t)
	h.Seed("provision-fail", "yes")
	r = h.run("init")
	if r.code != 3 || strings.Count(r.stderr, "installer failed") != 1 || strings.Count(r.stderr, "hermes-box: ") != 1 ||
		!strings.Contains(r.stderr, "hermes-box: building the base image failed: hermes: installer failed (agent provision exited with status 3)\nnext: re-run hermes-box init") ||
		!strings.Contains(r.stderr, "[hermes] failed (") {
		t.Errorf("init with a failing provision step: %d\n%s", r.code, r.stderr)
	}
	r = h.run("--log-format", "json", "init")
	evs = jsonEvents(t, r.stderr)
	var stepReason bool
	for _, ev := range evs {
		stepReason = stepReason || (ev.Step == "hermes" && ev.State == "failed" && ev.Fields["error"] == "installer failed")
	}
	if last := evs[len(evs)-1]; r.code != 3 || !stepReason || last.Level != "error" || last.Type != "log" ||
		!strings.Contains(last.Message, "hermes: installer failed") || last.Fields["hint"] == "" {
		t.Errorf("init with a failing provision step under --log-format json: %d\n%s", r.code, r.stderr)
	}
}

// event is one JSON Lines event of --log-format json.
type event struct {
	Type, Level, Message, Step, State string
	Fields                            map[string]string
}

// jsonEvents decodes stderr under --log-format json: every line an event.
func jsonEvents(t *testing.T, stderr string) []event {
	t.Helper()
	var evs []event
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var ev event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("stderr line is not a JSON event: %q", l)
		}
		evs = append(evs, ev)
	}
	return evs
}
