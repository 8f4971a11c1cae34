package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The mapped secret of the e2e box: secret-env.txt maps the gateway's
// OPENAI_API_KEY to this host variable.
const e2eSecretHostVar = "E2E_HOST_OPENAI_KEY"

// mapSecret writes secret-env.txt and puts a fresh value in the box's
// host environment; it returns the value.
func (b *box) mapSecret() string {
	secret := "sk-e2e-" + randHex(b.t, 12)
	writeFile(b.t, filepath.Join(b.Project, "secret-env.txt"), []byte("OPENAI_API_KEY="+e2eSecretHostVar+"\n"), 0o644)
	b.env = append(b.env, e2eSecretHostVar+"="+secret)
	return secret
}

// checkSecretDelivered: the gateway's environment (read as root through
// smolvm exec) holds the secret, and so does a login shell of the hermes
// user; no command line in the guest or on the host carries it.
func (b *box) checkSecretDelivered(secret string) {
	t := b.t
	pid := b.gatewayPID()
	environ := b.e.Smolvm("machine", "exec", "--name", b.Machine, "--", "cat", "/proc/"+strconv.Itoa(pid)+"/environ")
	mustf(t, strings.Contains("\x00"+environ+"\x00", "\x00OPENAI_API_KEY="+secret+"\x00"),
		"the gateway (guest pid %d) runs without the mapped OPENAI_API_KEY", pid)
	sum := sha256.Sum256([]byte(secret))
	got := b.ssh(`sudo -n -u hermes bash -lc 'printf %s "$OPENAI_API_KEY" | sha256sum | cut -d" " -f1'`)
	mustf(t, got == hex.EncodeToString(sum[:]), "the hermes user's login shell sees OPENAI_API_KEY with digest %q", got)
	fsType := b.e.Smolvm("machine", "exec", "--name", b.Machine, "--", "stat", "-f", "-c", "%T", "/run/hermes-box-secrets")
	mustf(t, strings.TrimSpace(fsType) == "tmpfs", "the secrets live on %q, not tmpfs", fsType)
	guestArgv := b.e.Smolvm("machine", "exec", "--name", b.Machine, "--", "sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null; true")
	mustf(t, len(guestArgv) > 0 && !strings.Contains(guestArgv, secret), "a guest command line carries the secret")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if c, err := os.ReadFile(p); err == nil && bytes.Contains(c, []byte(secret)) {
			t.Fatalf("host process %s carries the secret in its command line", p)
		}
	}
}

// checkSecretNowhere: no file of the project (state, logs, images,
// backups: manifests, sums and every tar member of every gzip part) and
// no stand-in state file holds the secret.
func (b *box) checkSecretNowhere(secret string) {
	t := b.t
	needle := []byte(secret)
	scanned, parts := 0, 0
	for _, root := range []string{b.Project, b.e.State} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			// VM disks are skipped: the guest keeps the secret on tmpfs
			// (checked in checkSecretDelivered). Backup parts (.gz) are
			// read whole, decompressed, whatever their size.
			if info, err := d.Info(); err != nil || (info.Size() > 64<<20 && !strings.HasSuffix(p, ".gz")) {
				return err
			}
			scanned++
			if strings.HasSuffix(p, ".gz") {
				parts++
			}
			if holds, err := fileHolds(p, needle); err != nil || holds {
				return errors.Join(err, errors.New(p+" holds the secret"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	mustf(t, parts >= 2, "only %d backup parts were scanned", parts)
	// What hermes-box printed: every command of the run so far, and the
	// services' logs as a user would read them.
	b.must(2*time.Minute, "logs", "-n", "2000")
	b.must(2*time.Minute, "logs", "-n", "2000", "hermes")
	for _, p := range b.printed {
		if strings.Contains(p, secret) {
			t.Fatalf("hermes-box printed the secret:\n%s", strings.SplitN(p, "\n", 2)[0])
		}
	}
	t.Logf("the secret is in none of %d files, %d of them decompressed backup parts, nor in the output of %d hermes-box commands",
		scanned, parts, len(b.printed))
}

// fileHolds looks for needle in a file, and in a .gz file in the members
// of its tar stream.
func fileHolds(path string, needle []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if !strings.HasSuffix(path, ".gz") {
		b, err := io.ReadAll(f)
		return bytes.Contains(b, needle), err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		return false, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if bytes.Contains([]byte(h.Name+h.Linkname), needle) || paxHolds(h.PAXRecords, needle) {
			return true, nil
		}
		b, err := io.ReadAll(tr)
		if err != nil || bytes.Contains(b, needle) {
			return err == nil, err
		}
	}
}

func paxHolds(recs map[string]string, needle []byte) bool {
	b, _ := json.Marshal(recs)
	return bytes.Contains(b, needle)
}
