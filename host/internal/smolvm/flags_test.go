package smolvm

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// createHelp is `smolvm machine create --help` in clap 4's long layout,
// trimmed to a few options.
const createHelp = `Create a new machine

Usage: smolvm machine create [OPTIONS] [-- <COMMAND>...]

Arguments:
  [COMMAND]...
          Persistent workload (requires --)

Options:
  -n, --name <NAME>
          Machine name
  -p, --port <HOST:GUEST>
          Publish a port
      --net
          Enable networking
  -i
          A short-only option
  -h, --help
          Print help (see a summary with '-h')
`

func TestListedFlags(t *testing.T) {
	got := listedFlags(createHelp)
	for _, f := range []string{"-n", "--name", "-p", "--port", "--net", "-i", "-h", "--help"} {
		if !got[f] {
			t.Errorf("%s not found in the help", f)
		}
	}
	for _, f := range []string{"--persistent", "--", "-g", "--requires", "--enable"} {
		if got[f] {
			t.Errorf("%s found in the help, which does not list it", f)
		}
	}
}

// helpRunner answers `--version` and every `SUB --help` with a help that
// lists exactly the flags hermes-box passes, but for drop.
type helpRunner struct {
	recorder
	version string // "" is 1.9.3
	drop    string // "machine create --net-backend"
	helps   int
}

func (h *helpRunner) Run(ctx context.Context, c Cmd) (Result, error) {
	if len(c.Args) == 1 && c.Args[0] == "--version" {
		return Result{Stdout: []byte("smolvm " + cmp.Or(h.version, "1.9.3") + "\n")}, nil
	}
	if len(c.Args) == 3 && c.Args[2] == "--help" {
		h.helps++
		verb := c.Args[0] + " " + c.Args[1]
		var b strings.Builder
		b.WriteString("Usage: smolvm " + verb + " [OPTIONS]\n\nOptions:\n")
		for _, f := range usedFlags[verb] {
			if verb+" "+f != h.drop {
				b.WriteString("      " + f + " <X>\n          text\n")
			}
		}
		return Result{Stdout: []byte(b.String())}, nil
	}
	return h.recorder.Run(ctx, c)
}

// tempBinary is a smolvm executable holding content, and a record of
// checked binaries (in its own state directory) that finds it.
func tempBinary(t *testing.T, content string) (string, *Binaries) {
	t.Helper()
	dir := t.TempDir()
	exe := filepath.Join(dir, "smolvm")
	if err := os.WriteFile(exe, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, &Binaries{File: filepath.Join(dir, "state", BinariesFile), Locate: func() (string, error) { return exe, nil }}
}

// TestCheckFlagsOnFirstDrive: the first Release of a binary reads every
// used subcommand's help; a flag it does not list is refused naming the
// flag, the subcommand and the release, before any other call; a checked
// binary (same path and content) is not asked again, a changed one is.
func TestCheckFlagsOnFirstDrive(t *testing.T) {
	ctx := context.Background()
	exe, bins := tempBinary(t, "v1")

	r := &helpRunner{drop: "machine create --net-backend"}
	d := New(r)
	d.RememberIn(bins)
	err := d.Start(ctx, "box")
	want := "smolvm 1.9.3 does not list --net-backend in `smolvm machine create --help`, and hermes-box passes --net-backend to machine create"
	if !errors.Is(err, ErrFlagMissing) || !strings.Contains(err.Error(), want) || len(r.calls) != 0 {
		t.Fatalf("err %v after %d calls, want %q and no call", err, len(r.calls), want)
	}
	if _, err := os.Stat(bins.File); err == nil {
		t.Errorf("a refused binary was recorded")
	}

	r = &helpRunner{}
	d = onHost(New(r), "darwin", "arm64", nil)
	d.RememberIn(bins)
	if err := d.Start(ctx, "box"); err != nil {
		t.Fatal(err)
	}
	if r.helps != 12 {
		t.Errorf("%d help calls, want one per subcommand with flags the release has (12)", r.helps)
	}
	r = &helpRunner{}
	d = onHost(New(r), "darwin", "arm64", nil)
	d.RememberIn(bins)
	if err := d.Start(ctx, "box"); err != nil || r.helps != 0 {
		t.Errorf("a remembered binary was asked again: %d help calls, %v", r.helps, err)
	}
	if err := os.WriteFile(exe, []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = &helpRunner{}
	d = onHost(New(r), "darwin", "arm64", nil)
	d.RememberIn(bins)
	if err := d.Start(ctx, "box"); err != nil || r.helps != 12 {
		t.Errorf("a changed binary was not checked: %d help calls, %v", r.helps, err)
	}
}

// TestUndeclaredFlagRefused: a call with a flag usedFlags does not declare
// never runs.
func TestUndeclaredFlagRefused(t *testing.T) {
	r := &recorder{}
	_, err := New(r).run(context.Background(), "machine stop", "box", Cmd{Args: []string{"machine", "stop", "--name", "box", "--force"}})
	if err == nil || !strings.Contains(err.Error(), "flag --force of machine stop is not declared") || len(r.calls) != 0 {
		t.Errorf("err %v after %d calls", err, len(r.calls))
	}
}

// TestDoctorVerdicts: a release outside the table is refused until
// hermes-box doctor passes on that binary, then accepted with a notice
// naming the run; a failed run refuses even a release of the table,
// naming the rows; while qualifying, the old verdict is not applied.
func TestDoctorVerdicts(t *testing.T) {
	ctx := context.Background()
	exe, bins := tempBinary(t, "1.25")
	driver := func(version string, qualifying bool) (*Driver, *[]string) {
		d := onHost(New(&helpRunner{version: version}), "darwin", "arm64", nil)
		d.RememberIn(bins)
		var notes []string
		d.OnNotice(func(s string) { notes = append(notes, s) })
		if qualifying {
			d.Qualifying()
		}
		return d, &notes
	}
	if _, err := (func() (any, error) { d, _ := driver("1.25.4", false); return d.Release(ctx) })(); err == nil || !strings.Contains(err.Error(), "hermes-box doctor") {
		t.Fatalf("an unqualified 1.25.4: %v", err)
	}
	d, _ := driver("1.25.4", true)
	if _, err := d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.RecordDoctor(DoctorRun{Run: "2026-11-26T21:00:00Z", Passed: true}); err != nil {
		t.Fatal(err)
	}
	d, notes := driver("1.25.4", false)
	if r, err := d.Release(ctx); err != nil || r.Version != "1.25.4" || r.HostLoopbackAlias || len(*notes) != 1 ||
		!strings.Contains((*notes)[0], "accepted for "+exe) || !strings.Contains((*notes)[0], "run 2026-11-26T21:00:00Z") {
		t.Errorf("a qualified 1.25.4: %+v %v %q", r, err, *notes)
	}
	d, _ = driver("1.25.4", true)
	if _, err := d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.RecordDoctor(DoctorRun{Run: "2026-11-26T22:00:00Z", Failed: []string{"vmm-confined", "exec-timeout"}}); err != nil {
		t.Fatal(err)
	}
	d, _ = driver("1.25.4", false)
	_, err := d.Release(ctx)
	if !errors.Is(err, ErrDoctorFailed) || !strings.Contains(err.Error(), "(run 2026-11-26T22:00:00Z) found smolvm 1.25.4 at "+exe+" failing: vmm-confined, exec-timeout") {
		t.Errorf("a failed binary: %v", err)
	}
	if err := os.WriteFile(exe, []byte("1.9.3"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, _ = driver("1.9.3", false)
	if _, err := d.Release(ctx); err != nil {
		t.Errorf("a new binary at the same path inherits the old verdict: %v", err)
	}
}

// FuzzListedFlags: any help text parses without panic into flags that
// each appear in it.
func FuzzListedFlags(f *testing.F) {
	f.Add(createHelp)
	f.Add("  -x\n      --a-b <C>\n  --\n")
	f.Fuzz(func(t *testing.T, help string) {
		for flag := range listedFlags(help) {
			if !strings.HasPrefix(flag, "-") || !strings.Contains(help, flag) {
				t.Errorf("flag %q from %q", flag, help)
			}
		}
	})
}

// TestSecretProbe: the doctor's throwaway reference is passed on create
// --from where a mapped secret would be refused, its value only in
// smolvm's environment, never in argv.
func TestSecretProbe(t *testing.T) {
	r := &versioned{version: "1.0.4"}
	err := New(r).Create(context.Background(), CreateSpec{Name: "doc-packed", From: "/d/doctor.smolmachine",
		SecretProbe: &SecretProbe{SecretRef: SecretRef{Guest: "G", Host: "H"}, Value: "v4lue"}})
	if err != nil || r.argv(0) != "machine create --name doc-packed --from /d/doctor.smolmachine --secret-env G=H" ||
		strings.Join(r.calls[0].Env, " ") != "H=v4lue" {
		t.Errorf("%v: %q %q", err, r.argv(0), r.calls[0].Env)
	}
}
