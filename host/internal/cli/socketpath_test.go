package cli_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// TestMacSocketPathRefused runs the real binary as on macOS (the hbxtest
// hook HBX_TEST_HOST_OS=darwin) for a user whose home is so long that
// smolvm's agent socket would pass 100 bytes: init and doctor refuse
// before any machine exists, naming the path, its length and the fix;
// start refuses before it boots the box.
func TestMacSocketPathRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	home := filepath.Join(t.TempDir(), strings.Repeat("h", 64))
	sock := filepath.Join(home, "Library/Caches/smolvm/vms/47737a4fb8b1135a/agent.sock") // sha256("hermes-box")[:8]
	want := []string{"agent socket at " + sock + ", " + strconv.Itoa(len(sock)) + " bytes", "smolvm fails every start past 100",
		"set a shorter SMOLVM_DATA_DIR", "next: nothing was created; set SMOLVM_DATA_DIR to a short directory"}
	long := []string{"HBX_TEST_HOST_OS=darwin", "HOME=" + home}
	for _, verb := range []string{"init", "doctor"} {
		h.Extra = long
		r := h.run(verb)
		if r.code == 0 || !containsAll(r.stderr, want) {
			t.Errorf("%s with a long home: exit %d\n%s", verb, r.code, r.stderr)
		}
		t.Logf("%s with a long home: exit %d\n%s", verb, r.code, r.stderr)
		for _, c := range boxtest.Lines(r.calls) {
			if !strings.HasSuffix(c, "--help") && (strings.Contains(c, "create") || strings.Contains(c, "start")) {
				t.Errorf("%s refused after smolvm %s", verb, c)
			}
		}
	}
	// A short SMOLVM_DATA_DIR is the fix: init goes on, and a later
	// start with the long path refuses before it boots the box.
	h.Extra = append(long, "SMOLVM_DATA_DIR=/Users/Shared/smolvm")
	if r := h.run("init"); r.code != 0 {
		t.Fatalf("init with a short SMOLVM_DATA_DIR: exit %d\n%s", r.code, r.stderr)
	}
	h.Extra = nil
	if r := h.run("stop"); r.code != 0 {
		t.Fatalf("stop: exit %d\n%s", r.code, r.stderr)
	}
	h.Extra = long
	r := h.run("start")
	if r.code == 0 || !containsAll(r.stderr, want) {
		t.Errorf("start with a long home: exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range boxtest.Lines(r.calls) {
		if strings.Contains(c, "machine start") {
			t.Errorf("start refused after smolvm %s", c)
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
