package keys

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"golang.org/x/crypto/ssh"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

// machineName is what a machine name may look like; it becomes a file name.
var machineName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// HostKeyPath returns the file that pins machine's host key.
func HostKeyPath(stateDir, machine string) (string, error) {
	if !machineName.MatchString(machine) {
		return "", fmt.Errorf("invalid machine name %q", machine)
	}
	return filepath.Join(stateDir, filenames.HostKeysDir, machine+PubSuffix), nil
}

// SaveHostKey pins key as machine's host key, replacing any earlier pin.
// The file holds one authorized_keys line and has mode 0600; the hostkeys
// directory is created with mode 0700.
func SaveHostKey(stateDir, machine string, key ssh.PublicKey) error {
	if key == nil {
		return errors.New("saving host key: no key")
	}
	path, err := HostKeyPath(stateDir, machine)
	if err != nil {
		return fmt.Errorf("saving host key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("saving host key of %s: %w", machine, err)
	}
	if err := atomicfile.Write(path, ssh.MarshalAuthorizedKey(key), 0o600); err != nil {
		return fmt.Errorf("saving host key of %s: %w", machine, err)
	}
	return nil
}

// LoadHostKey returns machine's pinned host key. When none is pinned the
// error wraps fs.ErrNotExist.
func LoadHostKey(stateDir, machine string) (ssh.PublicKey, error) {
	path, err := HostKeyPath(stateDir, machine)
	if err != nil {
		return nil, fmt.Errorf("loading host key: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading host key of %s: %w", machine, err)
	}
	key, _, _, rest, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil, fmt.Errorf("parsing host key %s: %w", path, err)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("parsing host key %s: more than one key", path)
	}
	return key, nil
}

// RemoveHostKey forgets machine's pinned host key. Removing a pin that does
// not exist is not an error.
func RemoveHostKey(stateDir, machine string) error {
	path, err := HostKeyPath(stateDir, machine)
	if err != nil {
		return fmt.Errorf("removing host key: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing host key of %s: %w", machine, err)
	}
	return nil
}

// KnownHostsLine returns the OpenSSH known_hosts line for key at host:port,
// for example "[127.0.0.1]:2222 ssh-ed25519 AAAA…" (port 22 is written as
// the bare host).
func KnownHostsLine(host string, port int, key ssh.PublicKey) string {
	addr := knownhosts.Normalize(net.JoinHostPort(host, strconv.Itoa(port)))
	return knownhosts.Line([]string{addr}, key)
}

// WriteKnownHosts replaces the file at path with the single known_hosts line
// for key at host:port (mode 0644), for use with the system ssh client's
// UserKnownHostsFile option. The file belongs to hermes-box; never point it at
// a user's own known_hosts.
func WriteKnownHosts(path, host string, port int, key ssh.PublicKey) error {
	if key == nil {
		return errors.New("writing known hosts: no key")
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("writing known hosts: invalid port %d", port)
	}
	if host == "" {
		return errors.New("writing known hosts: no host")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing known hosts: %w", err)
	}
	line := KnownHostsLine(host, port, key) + "\n"
	if err := atomicfile.Write(path, []byte(line), 0o644); err != nil {
		return fmt.Errorf("writing known hosts: %w", err)
	}
	return nil
}
