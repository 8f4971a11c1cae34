package keys

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hermes-box/hermes-box/shared/filenames"
)

func TestHostKeyPinning(t *testing.T) {
	first, second := newEd25519(t).PublicKey(), newEd25519(t).PublicKey()
	tests := []struct {
		name  string
		saves []ssh.PublicKey
		// remove calls RemoveHostKey after the saves.
		remove bool
		want   ssh.PublicKey
	}{
		{name: "save and load", saves: []ssh.PublicKey{first}, want: first},
		{name: "replace", saves: []ssh.PublicKey{first, second}, want: second},
		{name: "save again", saves: []ssh.PublicKey{first, first}, want: first},
		{name: "remove", saves: []ssh.PublicKey{first}, remove: true},
		{name: "none pinned"},
		{name: "remove none pinned", remove: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := t.TempDir()
			for _, k := range tt.saves {
				if err := SaveHostKey(stateDir, "hermes-box", k); err != nil {
					t.Fatalf("SaveHostKey: %v", err)
				}
			}
			if tt.remove {
				if err := RemoveHostKey(stateDir, "hermes-box"); err != nil {
					t.Fatalf("RemoveHostKey: %v", err)
				}
			}
			got, err := LoadHostKey(stateDir, "hermes-box")
			if tt.want == nil {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("LoadHostKey = %v, %v; want an error wrapping fs.ErrNotExist", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadHostKey: %v", err)
			}
			if !bytes.Equal(got.Marshal(), tt.want.Marshal()) {
				t.Errorf("LoadHostKey = %s, want %s", Fingerprint(got), Fingerprint(tt.want))
			}
			dir := filepath.Join(stateDir, filenames.HostKeysDir)
			checkMode(t, dir, 0o700)
			checkMode(t, filepath.Join(dir, "hermes-box.pub"), 0o600)
			checkOnlyFiles(t, dir, "hermes-box.pub")
		})
	}
}

func TestHostKeyMachineNames(t *testing.T) {
	key := newEd25519(t).PublicKey()
	tests := []struct {
		machine string
		ok      bool
	}{
		{machine: "hermes-box", ok: true},
		{machine: "box_2.candidate", ok: true},
		{machine: ""},
		{machine: ".."},
		{machine: "../escape"},
		{machine: "a/b"},
		{machine: ".hidden"},
		{machine: "sp ace"},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.machine, "/", "_"), func(t *testing.T) {
			stateDir := t.TempDir()
			err := SaveHostKey(stateDir, tt.machine, key)
			if (err == nil) != tt.ok {
				t.Fatalf("SaveHostKey(%q) = %v, want ok=%t", tt.machine, err, tt.ok)
			}
			if tt.ok {
				return
			}
			if _, err := LoadHostKey(stateDir, tt.machine); err == nil {
				t.Errorf("LoadHostKey(%q) succeeded", tt.machine)
			}
			if err := RemoveHostKey(stateDir, tt.machine); err == nil {
				t.Errorf("RemoveHostKey(%q) succeeded", tt.machine)
			}
		})
	}
}

func TestLoadHostKeyRefusesTwoKeys(t *testing.T) {
	stateDir := t.TempDir()
	a, b := newEd25519(t).PublicKey(), newEd25519(t).PublicKey()
	path := filepath.Join(stateDir, filenames.HostKeysDir, "box.pub")
	writeFile(t, path, append(ssh.MarshalAuthorizedKey(a), ssh.MarshalAuthorizedKey(b)...), 0o600)
	if _, err := LoadHostKey(stateDir, "box"); err == nil || !strings.Contains(err.Error(), "more than one key") {
		t.Errorf("LoadHostKey = %v, want a refusal of two keys", err)
	}
}

func TestWriteKnownHosts(t *testing.T) {
	key := newEd25519(t).PublicKey()
	other := newEd25519(t).PublicKey()
	keyText := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	tests := []struct {
		name     string
		host     string
		port     int
		wantLine string
		// dial is the address the ssh client would check.
		dial string
	}{
		{name: "loopback port", host: "127.0.0.1", port: 2222, wantLine: "[127.0.0.1]:2222 " + keyText, dial: "127.0.0.1:2222"},
		{name: "default port", host: "127.0.0.1", port: 22, wantLine: "127.0.0.1 " + keyText, dial: "127.0.0.1:22"},
		{name: "ipv6 loopback", host: "::1", port: 2222, wantLine: "[::1]:2222 " + keyText, dial: "[::1]:2222"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "known_hosts")
			// A stale line for another key must be replaced, not kept.
			if err := WriteKnownHosts(path, tt.host, tt.port, other); err != nil {
				t.Fatal(err)
			}
			if err := WriteKnownHosts(path, tt.host, tt.port, key); err != nil {
				t.Fatalf("WriteKnownHosts: %v", err)
			}
			got := string(readIfExists(t, path))
			if got != tt.wantLine+"\n" {
				t.Errorf("known_hosts = %q, want %q", got, tt.wantLine+"\n")
			}
			checkOnlyFiles(t, filepath.Dir(path), "known_hosts")
			cb, err := knownhosts.New(path)
			if err != nil {
				t.Fatalf("knownhosts.New: %v", err)
			}
			remote, err := net.ResolveTCPAddr("tcp", tt.dial)
			if err != nil {
				t.Fatal(err)
			}
			if err := cb(tt.dial, remote, key); err != nil {
				t.Errorf("known_hosts refuses the written key: %v", err)
			}
			if err := cb(tt.dial, remote, other); err == nil {
				t.Errorf("known_hosts accepts another key")
			}
		})
	}
}

func TestWriteKnownHostsRefusesBadInput(t *testing.T) {
	key := newEd25519(t).PublicKey()
	dir := t.TempDir()
	tests := []struct {
		name string
		host string
		port int
		key  ssh.PublicKey
	}{
		{name: "no key", host: "127.0.0.1", port: 2222},
		{name: "no host", port: 2222, key: key},
		{name: "port zero", host: "127.0.0.1", key: key},
		{name: "port too big", host: "127.0.0.1", port: 65536, key: key},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := WriteKnownHosts(filepath.Join(dir, "known_hosts"), tt.host, tt.port, tt.key); err == nil {
				t.Error("WriteKnownHosts succeeded")
			}
		})
	}
	checkOnlyFiles(t, dir)
}
