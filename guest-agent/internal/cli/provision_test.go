package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/netcheck"
	"github.com/hermes-box/hermes-box/guest-agent/internal/provision"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

func TestProvisionDryRun(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/hostname"), []byte("builder\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "", "--root", root, "provision", "--dry-run", "--arch", "arm64")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep provision.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !rep.DryRun || len(rep.Steps) != len(provision.Steps()) {
		t.Fatalf("report %+v", rep)
	}
	// An empty root has nothing to clean up or remove, and no key was
	// given; everything else, the gated-approval patch included, is pending.
	for _, s := range rep.Steps {
		want := map[string]string{"cleanup": "unchanged", "finalize": "unchanged", "authorized-keys": "skipped"}[s.Name]
		if want == "" {
			want = "pending"
		}
		if s.State != want || want == "pending" && len(s.Changes) == 0 {
			t.Errorf("step %s: %s %v, want %s", s.Name, s.State, s.Changes, want)
		}
	}
	if rep.Steps[0].Name != "hosts" || rep.Steps[0].Changes[0] != "add 127.0.1.1 builder to /etc/hosts" {
		t.Errorf("first step %+v", rep.Steps[0])
	}
	// A dry run changes nothing.
	ents, _ := os.ReadDir(root)
	if len(ents) != 1 {
		t.Errorf("the dry run created %v", ents)
	}
}

func TestProvisionRefusesUnpinnedArch(t *testing.T) {
	code, out, errs := run(t, "", "--root", t.TempDir(), "provision", "--dry-run", "--arch", "amd64")
	if code != 1 || out != "" || !strings.Contains(errs, "HERMES_BOX_UV_SHA256") {
		t.Fatalf("exit %d, out %q, err %s", code, out, errs)
	}
	// Codex is pinned on amd64 too: another digest may not replace it.
	code, _, errs = run(t, "", "--root", t.TempDir(), "provision", "--dry-run", "--arch", "amd64",
		"--uv-sha256", strings.Repeat("a", 64), "--codex-sha256", strings.Repeat("b", 64))
	if code != 1 || !strings.Contains(errs, "HERMES_BOX_CODEX_SHA256 may not change a pinned digest") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func TestProvisionTestPinsWarnAndValidate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins.json")
	if err := os.WriteFile(path, []byte(`{"uv":{"url":"http://127.0.0.1/uv","sha256":"`+strings.Repeat("a", 64)+`"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testPinsEnvName, path)
	code, _, errs := run(t, "", "--root", t.TempDir(), "provision", "--dry-run", "--arch", "arm64")
	if code != 1 || !strings.Contains(errs, "not an https address") || !strings.Contains(errs, "test-only stand-in artifacts") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func TestNetcheckVerb(t *testing.T) {
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	table := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t0102000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(proc, "net/route"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(table)
	// localhost resolves from /etc/hosts, so the test needs no network.
	code, out, errs := run(t, "", "netcheck", "--proc", proc, "--host", "localhost")
	var r netcheck.Result
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || !r.Ready || r.Route.Gateway != "10.0.2.1" {
		t.Fatalf("exit %d, %q, %s", code, out, errs)
	}
	write(strings.SplitAfterN(table, "\n", 2)[0])
	code, out, errs = run(t, "", "netcheck", "--proc", proc, "--host", "localhost")
	if code != 1 || json.Unmarshal([]byte(out), &r) != nil || r.Ready || r.Route.OK {
		t.Fatalf("exit %d, %q", code, out)
	}
	ev, err := protocol.DecodeEvent([]byte(strings.TrimSpace(errs)))
	if err != nil || !strings.Contains(ev.Message, "network not ready: no default IPv4 route") {
		t.Fatalf("stderr %q (%v)", errs, err)
	}
}

// testPinsEnvName is the test-only pins hook's name, which this package's
// tests give the hook whatever the build tags.
const testPinsEnvName = "HERMES_BOX_AGENT_TEST_ONLY_PINS"

func init() { testPinsEnv = testPinsEnvName }
