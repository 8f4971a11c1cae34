// Package executor is the agent's side of the optional Executor MCP
// gateway, behind the `executor` verb: the box's paths, the release store
// for this machine, the supervisor's `executor run` program (make the
// pinned image active, then replace itself with the release's own bun),
// and status. Connecting Hermes to Executor is its subpackage hermeslink,
// which links none of the image code.
package executor

import (
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// Paths are the box paths the executor verb works on, under a root.
type Paths struct {
	Runtime, Data, HermesHome string
}

// PathsFor returns the paths under root ("/" in the box).
func PathsFor(root string) Paths {
	return Paths{
		Runtime:    filepath.Join(root, boxlayout.ExecutorRuntimeDir),
		Data:       filepath.Join(root, boxlayout.ExecutorDataDir),
		HermesHome: filepath.Join(root, boxlayout.HermesHome),
	}
}

// StoreOptions tune image pulls.
type StoreOptions struct {
	// StallTimeout stops a pull after this long without a byte.
	StallTimeout time.Duration
	// CertDir holds extra CA certificates (*.crt) for the registry.
	CertDir string
	// Events receives progress; nil drops it.
	Events oci.Events
}

// NewStore is the release store of the box under root, pulling for this
// machine's architecture.
func NewStore(root string, o StoreOptions) (*oci.Store, error) {
	dir := PathsFor(root).Runtime
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &oci.Store{
		Root: dir,
		PullOptions: oci.PullOptions{
			Platform:     oci.Platform{OS: "linux", Architecture: runtime.GOARCH},
			StallTimeout: o.StallTimeout,
			CertDir:      o.CertDir,
			Events:       o.Events,
		},
		UID: -1, GID: -1,
		RunAs: RuntimeCredential(root),
	}, nil
}

// RuntimeCredential is the user Executor's commands run as: the runtime
// user when the agent is root in the real box, else nil (the agent itself).
func RuntimeCredential(root string) *syscall.Credential {
	if root != "/" || os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(boxlayout.ServiceUser)
	if err != nil {
		return nil
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}
