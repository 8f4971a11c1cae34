package smolvm

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// recorder is a Runner that records each call and answers from a script.
type recorder struct {
	calls   []Cmd
	answers []Result
}

func (r *recorder) Run(_ context.Context, c Cmd) (Result, error) {
	r.calls = append(r.calls, c)
	if len(r.answers) == 0 {
		return Result{}, nil
	}
	a := r.answers[0]
	r.answers = r.answers[1:]
	if c.Stdout != nil {
		c.Stdout.Write(a.Stdout)
	}
	return a, nil
}

func (r *recorder) argv(i int) string { return strings.Join(r.calls[i].Args, " ") }

// versioned is a recorder that answers `--version` with version and keeps
// that call out of calls.
type versioned struct {
	recorder
	version  string
	versions int
}

func (v *versioned) Run(ctx context.Context, c Cmd) (Result, error) {
	if len(c.Args) == 1 && c.Args[0] == "--version" {
		v.versions++
		return Result{Stdout: []byte("smolvm " + v.version + "\n")}, nil
	}
	return v.recorder.Run(ctx, c)
}

// onHost makes d run as on goos/goarch, reading a VMM's seccomp mode with
// mode.
func onHost(d *Driver, goos, goarch string, mode func(int) (string, error)) *Driver {
	d.host = host{goos: goos, goarch: goarch, seccompMode: mode}
	return d
}

// TestArgv checks the exact argv and environment of every call the
// driver makes, at each supported release that the host is tested with
// (on macOS, where the VMM's confinement does not apply: TestVMMConfinement).
func TestArgv(t *testing.T) {
	ctx := context.Background()
	const floor = "SMOLVM_EGRESS_FLOOR=strict"
	tests := []struct {
		name string
		call func(d *Driver) error
		want string
		// env per release; a release missing from the map means ""
		env map[string]string
	}{
		{"builder create", func(d *Driver) error {
			return d.Create(ctx, CreateSpec{Name: "b", Image: "ubuntu:24.04", CPUs: 2, MemoryMiB: 1024, StorageGB: 15, OverlayGB: 6, Net: true, NetBackend: "virtio-net"})
		}, "machine create --name b --image ubuntu:24.04 --cpus 2 --mem 1024 --storage 15 --overlay 6 --net --net-backend virtio-net", nil},
		{"runtime create", func(d *Driver) error {
			return d.Create(ctx, CreateSpec{Name: "box", From: "/i/base.smolmachine", Ports: []Port{{2222, 22}}, Env: []string{"A=b c"},
				Net: true, PackCacheMaxBytes: 16 << 30})
		}, "machine create --name box --from /i/base.smolmachine -p 2222:22 -e A=b c --net",
			map[string]string{"1.0.4": "SMOLVM_PACK_CACHE_MAX_BYTES=17179869184", "1.9.3": "SMOLVM_PACK_CACHE_MAX_BYTES=17179869184"}},
		{"update", func(d *Driver) error { return d.Update(ctx, UpdateSpec{Name: "box", Net: true}) }, "machine update --name box --net", nil},
		{"start", func(d *Driver) error { return d.Start(ctx, "box") }, "machine start --name box", map[string]string{"1.9.3": floor}},
		{"stop", func(d *Driver) error { return d.Stop(ctx, "box") }, "machine stop --name box", nil},
		{"delete", func(d *Driver) error { return d.Delete(ctx, "box", true) }, "machine delete --name box --force", nil},
		{"cp in", func(d *Driver) error { return d.CopyIn(ctx, "box", "/h/f", "/g/f") }, "machine cp /h/f box:/g/f", nil},
		{"cp out", func(d *Driver) error { return d.CopyOut(ctx, "box", "/g/f", "/h/f") }, "machine cp box:/g/f /h/f", nil},
		{"pack", func(d *Driver) error {
			return d.PackCreate(ctx, PackSpec{FromVM: "b", Smolfile: "/p/Smolfile", Output: "/i/out"})
		}, "pack create --from-vm b --smolfile /p/Smolfile --output /i/out", map[string]string{"1.9.3": floor}},
		{"exec", func(d *Driver) error {
			_, err := d.Exec(ctx, ExecSpec{Name: "box", Argv: []string{"/bin/true", "x y"}, Env: []string{"K=v"}, Timeout: 5 * time.Second})
			return err
		}, "machine exec --name box -e K=v --timeout 5s -- /bin/true x y", nil},
		{"exec stream stdin", func(d *Driver) error {
			_, err := d.Exec(ctx, ExecSpec{Name: "box", Argv: []string{"agent", "relay"}, Stream: true, Stdin: strings.NewReader("")})
			return err
		}, "machine exec --stream -i --name box -- agent relay", nil},
	}
	for _, version := range []string{"1.0.4", "1.9.3"} {
		for _, tt := range tests {
			t.Run(version+"/"+tt.name, func(t *testing.T) {
				r := &versioned{version: version}
				if err := tt.call(onHost(New(r), "darwin", "arm64", nil)); err != nil {
					t.Fatal(err)
				}
				if len(r.calls) != 1 {
					t.Fatalf("%d calls besides --version, want 1", len(r.calls))
				}
				if got := r.argv(0); got != tt.want {
					t.Errorf("argv\n got %s\nwant %s", got, tt.want)
				}
				if got := strings.Join(r.calls[0].Env, " "); got != tt.env[version] {
					t.Errorf("env %q, want %q", got, tt.env[version])
				}
			})
		}
	}
}

// TestReleaseGate checks that what the driver does depends on the row
// of the detected release, found with one --version call.
func TestReleaseGate(t *testing.T) {
	ctx := context.Background()
	secret := CreateSpec{Name: "box", From: "/a", SecretEnv: []SecretRef{{"G", "H"}}}
	strict := CreateSpec{Name: "box", From: "/a", Net: true, Egress: Egress{AllowHosts: []string{"api.example.com"}}}
	none := CreateSpec{Name: "box", From: "/a", Net: true, Egress: Egress{LocalhostOnly: true}}
	cases := []struct {
		version string
		spec    CreateSpec
		wantErr string
		want    string
	}{
		{"1.0.4", secret, "smolvm 1.0.4 drops --secret-env on create --from", ""},
		{"1.9.3", secret, "smolvm 1.9.3 drops --secret-env on create --from", ""},
		{"1.0.4", strict, "smolvm 1.0.4 does not enforce --allow-host/--outbound-localhost-only on create --from", ""},
		{"1.0.4", none, "smolvm 1.0.4 does not enforce", ""},
		{"1.9.3", strict, "", "machine create --name box --from /a --net --allow-host api.example.com"},
		{"1.9.0", none, "", "machine create --name box --from /a --net --outbound-localhost-only"},
		{"1.8.3", strict, "unsupported smolvm release \"1.8.3\"", ""},
	}
	for _, c := range cases {
		r := &versioned{version: c.version}
		err := New(r).Create(ctx, c.spec)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || len(r.calls) != 0 {
				t.Errorf("%s %+v: err %v after %d calls, want %q", c.version, c.spec.Egress, err, len(r.calls), c.wantErr)
			}
		case err != nil || r.argv(0) != c.want:
			t.Errorf("%s: %v, argv %q, want %q", c.version, err, r.calls, c.want)
		}
	}
	r := &versioned{version: "1.9.3"}
	d := onHost(New(r), "darwin", "arm64", nil)
	for range 3 {
		if err := d.Start(ctx, "box"); err != nil {
			t.Fatal(err)
		}
	}
	if r.versions != 1 || d.Unlisted() {
		t.Errorf("--version ran %d times (want 1), unlisted %v", r.versions, d.Unlisted())
	}
	r = &versioned{version: "1.16.2"}
	d = New(r)
	if err := d.Start(ctx, "box"); err == nil || !strings.Contains(err.Error(), pins.SmolvmInstallCommand(pins.SmolvmRecommended)) || len(r.calls) != 0 {
		t.Errorf("unlisted release: %v after %d calls", err, len(r.calls))
	}
	d = onHost(New(r), "darwin", "arm64", nil)
	d.Qualifying()
	if err := d.Start(ctx, "box"); err != nil || !d.Unlisted() || strings.Join(r.calls[0].Env, " ") != "SMOLVM_EGRESS_FLOOR=strict" {
		t.Errorf("a newer release while qualifying: %v, %v, %v", err, d.Unlisted(), r.calls)
	}
}

func TestBadSpecsRefusedBeforeRunning(t *testing.T) {
	ctx := context.Background()
	for name, call := range map[string]func(d *Driver) error{
		"no source":    func(d *Driver) error { return d.Create(ctx, CreateSpec{Name: "b"}) },
		"both sources": func(d *Driver) error { return d.Create(ctx, CreateSpec{Name: "b", Image: "i", From: "f"}) },
		"bad name":     func(d *Driver) error { return d.Start(ctx, "-n evil") },
		"bad port":     func(d *Driver) error { return d.Create(ctx, CreateSpec{Name: "b", Image: "i", Ports: []Port{{0, 22}}}) },
		"bad backend":  func(d *Driver) error { return d.Create(ctx, CreateSpec{Name: "b", Image: "i", NetBackend: "slirp"}) },
		"bad secret": func(d *Driver) error {
			return d.Create(ctx, CreateSpec{Name: "b", Image: "i", SecretEnv: []SecretRef{{"A", "$(x)"}}})
		},
		"no command":    func(d *Driver) error { _, err := d.Exec(ctx, ExecSpec{Name: "b"}); return err },
		"relative path": func(d *Driver) error { return d.CopyIn(ctx, "b", "/h", "g") },
	} {
		r := &recorder{}
		if err := call(New(r)); err == nil || len(r.calls) != 0 {
			t.Errorf("%s: err %v after %d calls", name, err, len(r.calls))
		}
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	r := &recorder{answers: []Result{{ExitCode: 1, Stderr: []byte("warn: x\nError: machine 'box' not found\n")}}}
	_, err := New(r).Status(ctx, "box")
	var se *Error
	if !errors.As(err, &se) || se.Message != "machine 'box' not found" || !IsNotFound(err) {
		t.Fatalf("err = %v", err)
	}
	r = &recorder{answers: []Result{{ExitCode: 2, Stderr: []byte("error: unexpected argument '-n' found\n\nUsage: …\n")}}}
	err = New(r).Start(ctx, "box")
	if !errors.As(err, &se) || se.ExitCode != 2 || se.Message != "unexpected argument '-n' found" {
		t.Fatalf("usage err = %v", err)
	}
	r = &recorder{answers: []Result{{ExitCode: 124}}}
	res, err := New(r).Exec(ctx, ExecSpec{Name: "box", Argv: []string{"sleep"}, Timeout: time.Second})
	if !errors.Is(err, ErrTimeout) || res.ExitCode != 124 {
		t.Fatalf("timeout: %v %d", err, res.ExitCode)
	}
	r = &recorder{answers: []Result{{ExitCode: 7}}}
	if res, err := New(r).Exec(ctx, ExecSpec{Name: "box", Argv: []string{"false"}}); err != nil || res.ExitCode != 7 {
		t.Fatalf("guest status: %v %d", err, res.ExitCode)
	}
}

func TestJSON(t *testing.T) {
	ctx := context.Background()
	ls := `[{"name":"a","state":"running","cpus":4,"memory_mib":8192,"pid":12,"network":true,"extra":1},
	{"name":"b","state":"stopped","cpus":1,"memory_mib":512,"pid":null,"network":false}]`
	r := &recorder{answers: []Result{{Stdout: []byte(ls)}, {Stdout: []byte("[]")}, {Stdout: []byte("null")}, {Stdout: []byte(`[{"name":"x"}]`)}}}
	d := New(r)
	ms, err := d.List(ctx)
	if err != nil || len(ms) != 2 || ms[0].State != StateRunning || *ms[0].PID != 12 || ms[1].PID != nil || !strings.Contains(string(ms[0].Raw), `"extra":1`) {
		t.Fatalf("List = %+v, %v", ms, err)
	}
	if ms, err := d.List(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("empty list = %v, %v", ms, err)
	}
	if _, err := d.List(ctx); err == nil {
		t.Error("null was accepted as a list")
	}
	if _, err := d.List(ctx); err == nil {
		t.Error("a machine without state was accepted")
	}
	r = &recorder{answers: []Result{{Stdout: []byte("smolvm 1.0.4\n")}, {Stdout: []byte("smolvm 1.0.4-dirty extra\n")}}}
	if v, err := New(r).Version(ctx); err != nil || v != "1.0.4" {
		t.Fatalf("Version = %q, %v", v, err)
	}
	if _, err := New(r).Version(ctx); err == nil {
		t.Error("odd version output accepted")
	}
}

func FuzzErrorMessage(f *testing.F) {
	f.Add([]byte("Error: x\n"))
	f.Add([]byte("error: a\n\nFor more information, try '--help'.\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		msg := errorMessage(b)
		if strings.Contains(msg, "\n") {
			t.Fatalf("multi-line message %q", msg)
		}
	})
}

// TestRunnerBoundsStdout: a call whose stdout (a guest's, for machine
// exec) passes the cap fails naming it, and the child is not left blocked.
func TestRunnerBoundsStdout(t *testing.T) {
	head, err := exec.LookPath("head")
	if err != nil {
		t.Skip("no head(1)")
	}
	res, err := ExecRunner{Path: head}.Run(t.Context(), Cmd{Args: []string{"-c", "20000000", "/dev/zero"}})
	if !errors.Is(err, bounded.ErrLimit) || len(res.Stdout) > maxStdout {
		t.Fatalf("got %d bytes, %v", len(res.Stdout), err)
	}
}
