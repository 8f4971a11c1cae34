package executor

import (
	"strings"
	"testing"
)

// TestProgramRefuses: a host port outside 1-65535 and a runtime without an
// active release give no program. The program of a real release is
// TestExecutorRunPullsActivatesAndExecs, in the agent's command line.
func TestProgramRefuses(t *testing.T) {
	p := PathsFor(t.TempDir())
	for _, tt := range []struct {
		port int
		want string
	}{
		{0, "host port 0 is not in 1-65535"},
		{65536, "host port 65536 is not in 1-65535"},
		{14788, "no active release under " + p.Runtime},
	} {
		if _, err := Program(p, tt.port); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("port %d: got %v, want %q", tt.port, err, tt.want)
		}
	}
}
