package doctor

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// fakeVM is a smolvm whose exec behaviour a test sets; every other call
// succeeds.
type fakeVM struct {
	status      int  // what `sh -c "exit 7"` returns
	noTimeout   bool // --timeout is ignored
	corrupt     bool // exec -i loses a byte
	deliver     bool // --secret-env reaches a machine created --from
	leaks       bool // the strict floor lets the probes through (they are refused)
	hangs       bool // a probe's connect hangs until --timeout
	dropXattrs  bool // pack create drops extended attributes
	secret      string
	probed      []string          // the probes' host:port
	xattrs      map[string]string // machine: the attribute's value on the probe file
	recorded    *smolvm.DoctorRun
	deleted     []string
	machineSeen map[string]bool
}

func (f *fakeVM) Release(context.Context) (pins.SmolvmRelease, error) {
	return pins.SmolvmBeyond("1.25.4"), nil
}
func (f *fakeVM) Unlisted() bool { return true }
func (f *fakeVM) Create(_ context.Context, s smolvm.CreateSpec) error {
	f.machineSeen[s.Name] = true
	if p := s.SecretProbe; p != nil && f.deliver {
		f.secret = p.Value
	}
	return nil
}
func (f *fakeVM) Update(context.Context, smolvm.UpdateSpec) error { return nil }
func (f *fakeVM) Start(context.Context, string) error             { return nil }
func (f *fakeVM) Stop(context.Context, string) error              { return nil }
func (f *fakeVM) Delete(_ context.Context, name string, _ bool) error {
	f.deleted = append(f.deleted, name)
	return nil
}
func (f *fakeVM) Status(_ context.Context, name string) (smolvm.Machine, error) {
	if !f.machineSeen[name] {
		return smolvm.Machine{}, smolvm.ErrNotFound
	}
	pid := 42
	return smolvm.Machine{Name: name, State: smolvm.StateRunning, PID: &pid}, nil
}
func (f *fakeVM) Exec(_ context.Context, s smolvm.ExecSpec) (smolvm.Result, error) {
	switch s.Argv[0] {
	case "/bin/sh":
		return smolvm.Result{ExitCode: f.status}, nil
	case "/bin/sleep":
		if f.noTimeout {
			return smolvm.Result{}, nil
		}
		return smolvm.Result{ExitCode: smolvm.ExitTimeout}, smolvm.ErrTimeout
	case "printenv":
		if f.secret == "" {
			return smolvm.Result{ExitCode: 1}, nil
		}
		fmt.Fprintln(s.Stdout, f.secret)
		return smolvm.Result{}, nil
	case "bash":
		f.probed = append(f.probed, s.Argv[4]+":"+s.Argv[5])
		switch {
		case f.leaks:
			return smolvm.Result{ExitCode: 1, Stderr: []byte("bash: connect: Connection refused\n")}, nil
		case f.hangs:
			return smolvm.Result{ExitCode: smolvm.ExitTimeout}, smolvm.ErrTimeout
		}
		return smolvm.Result{ExitCode: 1, Stderr: []byte("bash: connect: Network is unreachable\n")}, nil
	case "tar":
		return f.tar(s)
	case "sha256sum":
		b, _ := io.ReadAll(s.Stdin)
		if f.corrupt {
			b = b[1:]
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(s.Stdout, "%s  -\n", hex.EncodeToString(sum[:]))
		return smolvm.Result{}, nil
	}
	return smolvm.Result{}, errors.New("unexpected exec")
}

// tar plays GNU tar's --xattrs: -x keeps the probe file's attribute for
// the machine, -c writes it back as a PAX record.
func (f *fakeVM) tar(s smolvm.ExecSpec) (smolvm.Result, error) {
	if slices.Contains(s.Argv, "-x") {
		tr := tar.NewReader(s.Stdin)
		h, err := tr.Next()
		if err != nil {
			return smolvm.Result{}, err
		}
		f.xattrs[s.Name] = h.PAXRecords[xattrRecord]
		return smolvm.Result{}, nil
	}
	h := &tar.Header{Name: xattrFile, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if v := f.xattrs[s.Name]; v != "" {
		h.PAXRecords = map[string]string{xattrRecord: v}
	}
	tw := tar.NewWriter(s.Stdout)
	if err := tw.WriteHeader(h); err != nil {
		return smolvm.Result{}, err
	}
	return smolvm.Result{}, tw.Close()
}

func (f *fakeVM) PackCreate(_ context.Context, s smolvm.PackSpec) error {
	if !f.dropXattrs {
		f.xattrs[s.FromVM+"-packed"] = f.xattrs[s.FromVM]
	}
	return nil
}
func (f *fakeVM) CheckExtracted(context.Context, string) error { return nil }
func (f *fakeVM) VMMConfinement(smolvm.Machine) smolvm.Confinement {
	return smolvm.Confinement{State: smolvm.ConfinementConfined, Detail: "VMM pid 42 runs under a seccomp filter (Seccomp: 2)"}
}
func (f *fakeVM) RecordDoctor(run smolvm.DoctorRun) error { f.recorded = &run; return nil }

type loopback struct{ err, ownerErr error }

type gateways struct {
	addr netip.Addr
	err  error
}

func (g gateways) DefaultGateway(context.Context) (netip.Addr, error) { return g.addr, g.err }

func (l loopback) CheckLoopback(context.Context, int) error { return l.err }

func (l loopback) CheckOwner(_ context.Context, _, root int) error {
	if root != 42 {
		return fmt.Errorf("root %d is not the VMM's pid", root)
	}
	return l.ownerErr
}

// TestRowsFail: each measured behaviour that differs from what hermes-box
// relies on fails its own row (the others still run), the verdict is
// recorded with the failing rows, and both machines are deleted.
func TestRowsFail(t *testing.T) {
	tests := []struct {
		name   string
		vm     fakeVM
		listen error
		failed []string
		detail string
	}{
		{"all pass", fakeVM{status: probeStatus}, nil, nil, ""},
		{"exit status", fakeVM{status: 1}, nil, []string{RowExitStatus}, "a guest command that exits 7 gave smolvm exit status 1"},
		{"timeout ignored", fakeVM{status: probeStatus, noTimeout: true}, nil, []string{RowTimeout}, "--timeout 1s: a 60 s command ended with status 0, not 124"},
		{"stdin corrupted", fakeVM{status: probeStatus, corrupt: true}, nil, []string{RowLargeStdin}, "the guest's digest of the 8 MiB sent is"},
		{"secrets delivered", fakeVM{status: probeStatus, deliver: true}, nil, []string{RowSecrets}, "--secret-env on create --from: delivered true, but the row of smolvm 1.25.4 says false"},
		{"wide listener", fakeVM{status: probeStatus}, errors.New("port listens on 0.0.0.0"), []string{RowPorts}, "port listens on 0.0.0.0"},
		{"floor leaks", fakeVM{status: probeStatus, leaks: true}, nil, []string{RowEgress},
			"under SMOLVM_EGRESS_FLOOR=strict the guest reached host loopback through the host alias 100.96.0.1:"},
		{"probes hang", fakeVM{status: probeStatus, hangs: true}, nil, nil, ""},
		{"xattrs dropped", fakeVM{status: probeStatus, dropXattrs: true}, nil, []string{RowXattrs},
			"pack create --from-vm dropped user.hbx-doctor: /hbx-doctor-xattr in the machine created from the pack has no such attribute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := tt.vm
			vm.machineSeen, vm.xattrs = map[string]bool{}, map[string]string{}
			d := &Doctor{VM: &vm, Listener: loopback{err: tt.listen}, Gateways: gateways{addr: netip.MustParseAddr("192.0.2.1")}, Name: "doc", Port: 4000, Dir: t.TempDir(), StepTimeout: time.Minute}
			rep, err := d.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Failed(); strings.Join(got, ",") != strings.Join(tt.failed, ",") || rep.Passed != (len(tt.failed) == 0) {
				t.Fatalf("failed rows %v, want %v: %+v", got, tt.failed, rep.Rows)
			}
			for _, r := range rep.Rows {
				if len(tt.failed) > 0 && r.Name == tt.failed[0] && !strings.Contains(r.Detail, tt.detail) {
					t.Errorf("row %s: %q, want %q", r.Name, r.Detail, tt.detail)
				}
			}
			if vm.recorded == nil || vm.recorded.Passed != rep.Passed || strings.Join(vm.recorded.Failed, ",") != strings.Join(tt.failed, ",") {
				t.Errorf("recorded %+v", vm.recorded)
			}
			if len(vm.probed) != 3 || !strings.HasPrefix(vm.probed[0], hostAlias+":") || vm.probed[1] != "192.0.2.1:80" || vm.probed[2] != "169.254.169.254:80" {
				t.Errorf("probed %v, want the host alias, the LAN gateway and the metadata address", vm.probed)
			}
			if strings.Join(vm.deleted, ",") != "doc-packed,doc" {
				t.Errorf("deleted %v", vm.deleted)
			}
		})
	}
}

// TestPortsRowChecksTheOwner: the loopback-ports row also asks that the
// machine's VMM (its pid from status) holds the port, as the Executor's
// port is checked.
func TestPortsRowChecksTheOwner(t *testing.T) {
	vm := fakeVM{status: probeStatus, machineSeen: map[string]bool{}, xattrs: map[string]string{}}
	owner := errors.New("port 4000 is held by a process that is not the box's")
	d := &Doctor{VM: &vm, Listener: loopback{ownerErr: owner}, Gateways: gateways{addr: netip.MustParseAddr("192.0.2.1")},
		Name: "doc", Port: 4000, Dir: t.TempDir(), StepTimeout: time.Minute}
	rep, err := d.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Failed(); strings.Join(got, ",") != RowPorts {
		t.Fatalf("failed rows %v, want %s", got, RowPorts)
	}
	for _, r := range rep.Rows {
		if r.Name == RowPorts && !strings.Contains(r.Detail, owner.Error()) {
			t.Errorf("row %s: %q", r.Name, r.Detail)
		}
	}
}
