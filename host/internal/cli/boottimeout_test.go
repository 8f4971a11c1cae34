package cli_test

import (
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// TestBootTimeoutNamed: a machine that misses smolvm's fixed 30 s boot
// wait (smolvm's own message) is named as such, with its memory as the
// likely cause and the setting to change.
func TestBootTimeoutNamed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "HERMES_BOX_MEMORY_MIB=8192")
	h.Extra = []string{"FAKESMOLVM_FAIL=machine start@" + boxtest.Builder,
		"FAKESMOLVM_FAIL_MESSAGE=wait for ready: agent did not become ready within 30 seconds"}
	r := h.run("init")
	expectFailure(t, "init whose builder misses the boot wait", r, 1,
		[]string{"agent did not become ready within 30 seconds",
			boxtest.Builder + " did not boot within smolvm's fixed 30 s wait; its memory, 8192 MiB, is the likely cause",
			"next: free memory on this host and run the command again, or set a smaller HERMES_BOX_MEMORY_MIB in hermes-box.conf"})
}
