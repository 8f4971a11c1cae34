package doctor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	secret      string
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
func (f *fakeVM) PackCreate(context.Context, smolvm.PackSpec) error { return nil }
func (f *fakeVM) CheckExtracted(context.Context, string) error      { return nil }
func (f *fakeVM) VMMConfinement(smolvm.Machine) smolvm.Confinement {
	return smolvm.Confinement{State: smolvm.ConfinementConfined, Detail: "VMM pid 42 runs under a seccomp filter (Seccomp: 2)"}
}
func (f *fakeVM) RecordDoctor(run smolvm.DoctorRun) error { f.recorded = &run; return nil }

type loopback struct{ err error }

func (l loopback) CheckLoopback(context.Context, int) error { return l.err }

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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vm := tt.vm
			vm.machineSeen = map[string]bool{}
			d := &Doctor{VM: &vm, Listener: loopback{tt.listen}, Name: "doc", Port: 4000, Dir: t.TempDir(), StepTimeout: time.Minute}
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
			if strings.Join(vm.deleted, ",") != "doc-packed,doc" {
				t.Errorf("deleted %v", vm.deleted)
			}
		})
	}
}
