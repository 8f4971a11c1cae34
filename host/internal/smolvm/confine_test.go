package smolvm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestVMMConfinement: on Linux every booting call asks for seccomp and
// Landlock where the release has them, a start is followed by a read of
// the VMM's seccomp mode, and a VMM without a filter is stopped and
// refused; a release without seccomp for the architecture is refused
// before anything runs; turned off, nothing is asked or checked.
func TestVMMConfinement(t *testing.T) {
	ctx := context.Background()
	status := `{"name":"box","state":"running","pid":4242}`
	const all = "SMOLVM_SECCOMP=enforce SMOLVM_LANDLOCK=enforce SMOLVM_EGRESS_FLOOR=strict"
	tests := []struct {
		name, version, goarch string
		mode                  string // what /proc says of pid 4242
		off                   bool
		call                  func(d *Driver) error
		wantCalls             []string
		wantEnv               string // of the first call
		wantErr               string
	}{
		{name: "confined start", version: "1.9.3", goarch: "amd64", mode: "2", call: func(d *Driver) error { return d.Start(ctx, "box") },
			wantCalls: []string{"machine start --name box", "machine status --name box --json"}, wantEnv: all},
		{name: "1.0.4 start", version: "1.0.4", goarch: "amd64", mode: "2", call: func(d *Driver) error { return d.Start(ctx, "box") },
			wantCalls: []string{"machine start --name box", "machine status --name box --json"}, wantEnv: "SMOLVM_SECCOMP=enforce SMOLVM_LANDLOCK=enforce"},
		{name: "unconfined VMM", version: "1.9.3", goarch: "arm64", mode: "0", call: func(d *Driver) error { return d.Start(ctx, "box") },
			wantCalls: []string{"machine start --name box", "machine status --name box --json", "machine stop --name box"}, wantEnv: all,
			wantErr: "the VMM of box (pid 4242) runs without a seccomp filter (Seccomp: 0 in /proc/4242/status) although SMOLVM_SECCOMP=enforce was set; the machine was stopped"},
		{name: "no seccomp on arm64", version: "1.0.4", goarch: "arm64", call: func(d *Driver) error { return d.Start(ctx, "box") },
			wantErr: "smolvm 1.0.4 has no seccomp filter for its VMM on linux/arm64"},
		{name: "pack", version: "1.9.3", goarch: "amd64", call: func(d *Driver) error {
			return d.PackCreate(ctx, PackSpec{FromVM: "b", Output: "/i/out"})
		}, wantCalls: []string{"pack create --from-vm b --output /i/out"}, wantEnv: all},
		{name: "off", version: "1.9.3", goarch: "amd64", off: true, mode: "0", call: func(d *Driver) error { return d.Start(ctx, "box") },
			wantCalls: []string{"machine start --name box"}, wantEnv: "SMOLVM_EGRESS_FLOOR=strict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &versioned{version: tt.version, recorder: recorder{answers: []Result{{}, {Stdout: []byte(status)}, {}}}}
			d := onHost(New(r), "linux", tt.goarch, func(pid int) (string, error) {
				if pid != 4242 {
					return "", fmt.Errorf("read pid %d", pid)
				}
				return tt.mode, nil
			})
			d.ConfineVMM(!tt.off)
			err := tt.call(d)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrUnconfined)) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
			var got []string
			for i := range r.calls {
				got = append(got, r.argv(i))
			}
			if strings.Join(got, "\n") != strings.Join(tt.wantCalls, "\n") {
				t.Errorf("calls %q, want %q", got, tt.wantCalls)
			}
			if len(r.calls) > 0 && strings.Join(r.calls[0].Env, " ") != tt.wantEnv {
				t.Errorf("env %q, want %q", r.calls[0].Env, tt.wantEnv)
			}
		})
	}
}

// TestConfinementReport is what status shows.
func TestConfinementReport(t *testing.T) {
	pid := 7
	m := Machine{Name: "box", State: "running", PID: &pid}
	tests := []struct {
		goos string
		off  bool
		read string
		want Confinement
	}{
		{"linux", false, "2", Confinement{"confined", "VMM pid 7 runs under a seccomp filter (Seccomp: 2)"}},
		{"linux", false, "0", Confinement{"unconfined", "the VMM is not confined: the VMM of box (pid 7) runs without a seccomp filter (Seccomp: 0 in /proc/7/status) although SMOLVM_SECCOMP=enforce was set"}},
		{"linux", true, "0", Confinement{"off", "HERMES_BOX_VMM_CONFINEMENT=off: the VMM runs without seccomp or Landlock"}},
		{"darwin", false, "", Confinement{"not-applicable", "smolvm confines its VMM with seccomp and Landlock on Linux only"}},
	}
	for _, tt := range tests {
		d := onHost(New(&recorder{}), tt.goos, "amd64", func(int) (string, error) { return tt.read, nil })
		d.ConfineVMM(!tt.off)
		if got := d.VMMConfinement(m); got != tt.want {
			t.Errorf("%s off=%v: %+v, want %+v", tt.goos, tt.off, got, tt.want)
		}
	}
}
