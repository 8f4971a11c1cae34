package smolvm

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestAgentSocketPath(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	// printf hermes-box | sha256sum | cut -c1-16
	const hash = "47737a4fb8b1135a"
	long := "/Users/" + strings.Repeat("a", 42)
	tests := []struct {
		goos string
		env  func(string) string
		path string
		err  string
	}{
		{"darwin", env("HOME", "/Users/"+strings.Repeat("a", 39)), "/Users/" + strings.Repeat("a", 39) + "/Library/Caches/smolvm/vms/" + hash + "/agent.sock", ""}, // 100 bytes
		{"darwin", env("HOME", "/Users/alice"), "/Users/alice/Library/Caches/smolvm/vms/" + hash + "/agent.sock", ""},
		{"darwin", env("HOME", long), long + "/Library/Caches/smolvm/vms/" + hash + "/agent.sock",
			"agent socket at " + long + "/Library/Caches/smolvm/vms/" + hash + "/agent.sock, 103 bytes; macOS allows 104 (sun_path) and smolvm fails every start past 100 (krun_start_enter -22), and your home directory makes it 3 bytes too long: set a shorter SMOLVM_DATA_DIR"},
		{"darwin", env("HOME", "/Users/alice", "SMOLVM_DATA_DIR", long), long + "/Library/Caches/smolvm/vms/" + hash + "/agent.sock", "and SMOLVM_DATA_DIR makes it 3 bytes too long"},
		{"darwin", env("HOME", long, "SMOLVM_DATA_DIR", "/Users/Shared/smolvm"), "/Users/Shared/smolvm/Library/Caches/smolvm/vms/" + hash + "/agent.sock", ""},
		{"linux", env("HOME", long), long + "/.cache/smolvm/vms/" + hash + "/agent.sock", ""},
		{"linux", env("HOME", "/home/u", "XDG_CACHE_HOME", "/c"), "/c/smolvm/vms/" + hash + "/agent.sock", ""},
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			if got := AgentSocketPath(tt.goos, tt.env, "hermes-box"); got != tt.path {
				t.Errorf("path %s, want %s", got, tt.path)
			}
			err := CheckAgentSocket(tt.goos, tt.env, "hermes-box")
			if tt.err == "" && err != nil || tt.err != "" && (!errors.Is(err, ErrSocketPathTooLong) || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("check: %v; want %q", err, tt.err)
			}
		})
	}
	// The length does not depend on the name, as smolvm's hash keeps it.
	a := AgentSocketPath("darwin", env("HOME", "/h"), "b")
	b := AgentSocketPath("darwin", env("HOME", "/h"), strings.Repeat("n", 128))
	if len(a) != len(b) {
		t.Errorf("%d != %d", len(a), len(b))
	}
}
