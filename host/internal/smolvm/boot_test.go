package smolvm

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/userr"
)

// TestPackHelperMemory: pack create passes the helper VM's memory on the
// releases whose row says they take it (1.16.2 on), and on no other.
func TestPackHelperMemory(t *testing.T) {
	for _, tt := range []struct {
		version string
		want    bool
	}{{"1.9.3", false}, {"1.16.1", false}, {"1.16.2", true}, {"1.25.4", true}} {
		r := &versioned{version: tt.version}
		d := onHost(New(r), "darwin", "arm64", nil)
		d.Qualifying()
		if err := d.PackCreate(t.Context(), PackSpec{FromVM: "b", Output: "/i/out"}); err != nil {
			t.Fatalf("%s: %v", tt.version, err)
		}
		env := strings.Join(r.calls[0].Env, " ")
		if got := strings.Contains(env, "SMOLVM_EXPORT_HELPER_MEMORY_MIB=2048"); got != tt.want {
			t.Errorf("%s: env %q, helper memory passed %v, want %v", tt.version, env, got, tt.want)
		}
	}
}

// TestBootTimeout: smolvm's message for a guest that missed its 30 s wait
// is named as such, with the machine's memory (from status) and the next
// step; another start failure passes unchanged.
func TestBootTimeout(t *testing.T) {
	r := &versioned{version: "1.9.3"}
	r.answers = []Result{
		{ExitCode: 1, Stderr: []byte("Error: wait for ready: agent did not become ready within 30 seconds\n")},
		{Stdout: []byte(`{"name":"box","state":"stopped","memory_mib":8192}`)},
	}
	err := onHost(New(r), "darwin", "arm64", nil).Start(t.Context(), "box")
	if !errors.Is(err, ErrBootTimeout) || !strings.Contains(err.Error(), "box did not boot within smolvm's fixed 30 s wait; its memory, 8192 MiB, is the likely cause") {
		t.Errorf("boot timeout: %v", err)
	}
	if h := userr.Hint(err); !strings.Contains(h, "set a smaller HERMES_BOX_MEMORY_MIB") {
		t.Errorf("next step %q", h)
	}
	r = &versioned{version: "1.9.3"}
	r.answers = []Result{{ExitCode: 1, Stderr: []byte("Error: failed to start the VM\n")}}
	err = onHost(New(r), "darwin", "arm64", nil).Start(t.Context(), "box")
	if err == nil || errors.Is(err, ErrBootTimeout) || len(r.calls) != 1 {
		t.Errorf("another failure: %v after %d calls", err, len(r.calls))
	}
}
