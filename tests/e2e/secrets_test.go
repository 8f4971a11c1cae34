package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
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
// backups: records, manifests, sums, every tar member of every gzip part of
// a v2 backup and every chunk of every pack of the chunk stores,
// decompressed) and no stand-in state file holds the secret.
func (b *box) checkSecretNowhere(secret string) {
	t := b.t
	needle := []byte(secret)
	scanned, parts, packs := 0, 0, 0
	for _, root := range []string{b.Project, b.e.State} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			// VM disks are skipped: the guest keeps the secret on tmpfs
			// (checked in checkSecretDelivered). Backup parts (.gz) and
			// packs are read whole, decompressed, whatever their size.
			backupData := strings.HasSuffix(p, ".gz") || strings.HasSuffix(p, packExt)
			if info, err := d.Info(); err != nil || (info.Size() > 64<<20 && !backupData) {
				return err
			}
			scanned++
			switch {
			case strings.HasSuffix(p, ".gz"):
				parts++
			case strings.HasSuffix(p, packExt):
				packs++
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
	// The snapshot and the restore's safety snapshot are incremental (the
	// default): their data is in the machine's packs.
	mustf(t, packs >= 1, "only %d packs (and %d v2 parts) were scanned", packs, parts)
	// What hermes-box printed: every command of the run so far, and the
	// services' logs as a user would read them.
	b.must(2*time.Minute, "logs", "-n", "2000")
	b.must(2*time.Minute, "logs", "-n", "2000", "hermes")
	for _, p := range b.printed {
		if strings.Contains(p, secret) {
			t.Fatalf("hermes-box printed the secret:\n%s", strings.SplitN(p, "\n", 2)[0])
		}
	}
	t.Logf("the secret is in none of %d files, %d of them decompressed backup parts and %d decompressed packs, nor in the output of %d hermes-box commands",
		scanned, parts, packs, len(b.printed))
}

// fileHolds looks for needle in a file, in a .gz file in the members of
// its tar stream, and in a pack in its chunks.
func fileHolds(path string, needle []byte) (bool, error) {
	if strings.HasSuffix(path, packExt) {
		return packHolds(path, needle)
	}
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

// packExt ends the name of a chunk store's pack (host/internal/chunkstore:
// blobs, then a header of 41-byte entries, each a chunk's SHA-256, its
// stored and plain lengths (uint32 LE) and 1 when zstd-compressed, then
// the entry count (uint32 LE) and packMagic).
const packExt = ".pack"

var packMagic = []byte("HBXPACK1")

// packHolds looks for needle in the plaintext of a pack's chunks, read
// in the pack's order, which is the order the snapshot cut them: each
// chunk is searched with the tail of the one before, so that a needle
// across a cut is found too. Every chunk is checked against its SHA-256,
// so the scan reads what the store holds and not garbage.
func packHolds(path string, needle []byte) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	const entrySize = 41
	trailer := 4 + len(packMagic)
	if len(data) < trailer || !bytes.Equal(data[len(data)-len(packMagic):], packMagic) {
		return false, fmt.Errorf("%s: not a pack", path)
	}
	n := int(binary.LittleEndian.Uint32(data[len(data)-trailer:]))
	hdrAt := len(data) - trailer - n*entrySize
	if hdrAt < 0 {
		return false, fmt.Errorf("%s: a header of %d entries does not fit", path, n)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return false, err
	}
	defer dec.Close()
	var carry []byte
	off := 0
	for i := range n {
		e := data[hdrAt+i*entrySize : hdrAt+(i+1)*entrySize]
		slen, rlen := int(binary.LittleEndian.Uint32(e[32:])), int(binary.LittleEndian.Uint32(e[36:]))
		if off+slen > hdrAt {
			return false, fmt.Errorf("%s: chunk %d overruns the header", path, i)
		}
		plain := data[off : off+slen]
		if e[40] == 1 {
			if plain, err = dec.DecodeAll(plain, make([]byte, 0, rlen)); err != nil {
				return false, fmt.Errorf("%s: chunk %d: %w", path, i, err)
			}
		}
		if sum := sha256.Sum256(plain); !bytes.Equal(sum[:], e[:32]) {
			return false, fmt.Errorf("%s: chunk %d does not hash to its name", path, i)
		}
		if bytes.Contains(append(carry, plain...), needle) {
			return true, nil
		}
		carry = append(carry[:0], plain[max(0, len(plain)-len(needle)+1):]...)
		off += slen
	}
	return false, nil
}
