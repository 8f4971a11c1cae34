// Package secrets keeps the box's mapped secrets in the guest: on tmpfs
// under /run/hermes-box-secrets, a root-only JSON file the supervisor reads
// each time it starts the Hermes gateway, and a copy for the hermes user's
// login shells (sourced from /etc/profile.d). Nothing is written to the
// root file system's persistent parts, so snapshots never carry them.
package secrets

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// The files on the secrets' tmpfs (boxlayout.SecretsDir); the profile that
// sources UserFile in login shells is boxlayout.SecretsProfile.
const (
	// RootFile is the root-only JSON object the supervisor reads.
	RootFile = boxlayout.SecretsDir + "/root/env.json"
	// UserFile is the hermes user's copy as shell assignments.
	UserFile = boxlayout.SecretsDir + "/hermes/env.sh"
)

//go:embed profile.sh
var profile []byte

// Write replaces the secrets under root with s: the root file (0600 in a
// 0700 directory of the agent's, root in the box), the user's copy (0400
// in a 0700 directory owned by owner) and the profile snippet. An empty s
// leaves both files empty.
func Write(root string, s protocol.Secrets, owner passwd.User) error {
	if err := s.Validate(); err != nil {
		return err
	}
	rootDir := filepath.Join(root, filepath.Dir(RootFile))
	userDir := filepath.Join(root, filepath.Dir(UserFile))
	// The top directory only lets the hermes user through to its own.
	top := filepath.Join(root, boxlayout.SecretsDir)
	if err := os.MkdirAll(top, 0o711); err != nil {
		return fmt.Errorf("creating %s: %w", top, err)
	}
	if err := os.Chmod(top, 0o711); err != nil {
		return err
	}
	// The agent runs as root in the box: its own identity is "root-only".
	if err := mkdirOwned(rootDir, uint32(os.Getuid()), uint32(os.Getgid())); err != nil {
		return err
	}
	if err := mkdirOwned(userDir, owner.UID, owner.GID); err != nil {
		return err
	}
	doc, err := json.Marshal(s.Env)
	if err != nil {
		return fmt.Errorf("encoding secrets: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(root, RootFile), doc, 0o600); err != nil {
		return fmt.Errorf("writing the secrets: %w", err)
	}
	user := filepath.Join(root, UserFile)
	if err := atomicfile.Write(user, shellAssignments(s), 0o400); err != nil {
		return fmt.Errorf("writing the hermes user's secrets: %w", err)
	}
	if err := os.Lchown(user, int(owner.UID), int(owner.GID)); err != nil {
		return fmt.Errorf("handing the secrets to %s: %w", owner.Name, err)
	}
	return installProfile(root)
}

// Load returns the root file's variables as sorted "K=V" entries; a
// missing file has none. The supervisor calls it before each start.
func Load(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the secrets: %w", err)
	}
	var env map[string]string
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("secrets file %s is not a JSON object", path)
	}
	s := protocol.Secrets{Env: env}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(env))
	for _, k := range s.Names() {
		out = append(out, k+"="+env[k])
	}
	sort.Strings(out)
	return out, nil
}

// shellAssignments renders `export K='v'` lines; single quotes inside a
// value become '\”.
func shellAssignments(s protocol.Secrets) []byte {
	var b strings.Builder
	for _, k := range s.Names() {
		b.WriteString("export " + k + "='" + strings.ReplaceAll(s.Env[k], "'", `'\''`) + "'\n")
	}
	return []byte(b.String())
}

func mkdirOwned(dir string, uid, gid uint32) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	info, err := os.Lstat(dir)
	if err != nil || !info.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return os.Lchown(dir, int(uid), int(gid))
}

func installProfile(root string) error {
	p := filepath.Join(root, boxlayout.SecretsProfile)
	if b, err := os.ReadFile(p); err == nil && string(b) == string(profile) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(p, profile, 0o644)
}
