package smolvm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
)

// AgentSocketMax is the longest agent socket path smolvm starts a machine
// with on macOS, in bytes. sun_path holds 104 bytes there (with its NUL);
// smolvm fails every start with `krun_start_enter -22` once
// `<data dir>/vms/<16 hex>/agent.sock` passes about 100 bytes (seen on
// 1.11–1.14), so hermes-box refuses anything longer than 100.
const AgentSocketMax = 100

// ErrSocketPathTooLong is wrapped when smolvm's agent socket path for this
// user would pass AgentSocketMax.
var ErrSocketPathTooLong = errors.New("smolvm's agent socket path is too long")

// AgentSocketPath is the agent socket smolvm uses for machine name on
// goos: `<cache dir>/smolvm/vms/<first 16 hex of SHA-256(name)>/agent.sock`
// (vm_data_dir and vm_dir_hash, src/agent/manager.rs at v1.9.3). The cache
// dir is the `dirs` crate's: $HOME/Library/Caches on macOS, $XDG_CACHE_HOME
// or $HOME/.cache on Linux; SMOLVM_DATA_DIR, when set, becomes smolvm's
// HOME before any path is computed (apply_system_data_root: Linux at
// v1.9.3; reported on macOS by later releases' users, so it is counted on
// both). The length does not depend on the name.
func AgentSocketPath(goos string, getenv func(string) string, name string) string {
	home := getenv("HOME")
	if d := getenv("SMOLVM_DATA_DIR"); d != "" {
		home = d
	}
	cache := filepath.Join(home, ".cache")
	switch {
	case goos == "darwin":
		cache = filepath.Join(home, "Library", "Caches")
	case getenv("XDG_CACHE_HOME") != "" && getenv("SMOLVM_DATA_DIR") == "":
		cache = getenv("XDG_CACHE_HOME")
	}
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(cache, "smolvm", "vms", hex.EncodeToString(sum[:8]), "agent.sock")
}

// CheckAgentSocket refuses, on macOS, a user for whom smolvm's agent
// socket would pass AgentSocketMax: every start would fail. The error
// names the path, its length and the fix. Linux (sun_path 108, and no
// failure seen) is not checked.
func CheckAgentSocket(goos string, getenv func(string) string, name string) error {
	if goos != "darwin" {
		return nil
	}
	p := AgentSocketPath(goos, getenv, name)
	if len(p) <= AgentSocketMax {
		return nil
	}
	where := "your home directory"
	if getenv("SMOLVM_DATA_DIR") != "" {
		where = "SMOLVM_DATA_DIR"
	}
	return fmt.Errorf("%w: smolvm would put machine %s's agent socket at %s, %d bytes; macOS allows %d (sun_path) and smolvm fails every start past %d (krun_start_enter -22), and %s makes it %s too long: set a shorter SMOLVM_DATA_DIR (for example /Users/Shared/smolvm) in the environment of hermes-box and smolvm, or run them as a user with a shorter home directory",
		ErrSocketPathTooLong, name, p, len(p), 104, AgentSocketMax, where, byteCount(len(p)-AgentSocketMax))
}

func byteCount(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
