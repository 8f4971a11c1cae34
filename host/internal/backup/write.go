package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// PartSource streams one part (a gzip tar) to w; for a box it runs the
// agent's `snapshot write PART` over the relay.
type PartSource func(ctx context.Context, part string, w io.Writer) error

// Meta is what a new backup records about its origin.
type Meta struct {
	Machine string
	Label   string
	Smolvm  string // `smolvm --version` output, or "unknown"
	GOOS    string
	// Signer is the project key: it signs SHA256SUMS, and the manifest
	// records its fingerprint.
	Signer ssh.Signer
	// AuditAnchor goes into the manifest (Manifest.AuditAnchor).
	AuditAnchor string
	// Box names the box itself (its pinned SSH host key's fingerprint,
	// new after destroy and init): an incremental snapshot tells a box
	// only of chunks its own backups hold (chunkstore's held list).
	Box string
	Now time.Time
	// Limits bound the parts; the zero value is the defaults.
	Limits Limits
}

// CheckAnchor refuses an audit anchor that is not one line: a backup
// records it as it is (the manifest's audit_anchor line, an incremental
// record's audit_anchor field).
func (m Meta) CheckAnchor() error {
	if strings.ContainsAny(m.AuditAnchor, "\r\n") {
		return errors.New("snapshot: the audit anchor must be one line")
	}
	return nil
}

// checkSigned refuses a meta a backup cannot be written with: no key to
// sign it, or an audit anchor that is not one line.
func (m Meta) checkSigned() error {
	if m.Signer == nil {
		return errors.New("snapshot: no project key to sign the backup with")
	}
	return m.CheckAnchor()
}

// tempPrefix names the directory a backup is written in before it is
// published under its final name; Reap removes stale ones.
const tempPrefix = ".hermes-box-snapshot-"

// crashPoint, when set (tests only), is called at each named step.
var crashPoint = func(string) {}

// Write streams both parts into a new backup below backupsDir, hashing and
// listing while writing, and returns the published directory. Until the
// final rename no name ending in .hermesbox exists, so an interrupted write
// never looks complete; its temp directory is removed on failure or, after
// a crash, by Reap.
func Write(ctx context.Context, backupsDir string, meta Meta, src PartSource) (dir string, err error) {
	if err := meta.checkSigned(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(backupsDir, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", backupsDir, err)
	}
	lim := meta.Limits.withDefaults()
	if err := lim.checkFree(backupsDir); err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	tmp, err := os.MkdirTemp(backupsDir, tempPrefix)
	if err != nil {
		return "", fmt.Errorf("creating backup: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o700); err != nil {
		return "", fmt.Errorf("creating backup: %w", err)
	}
	crashPoint("temp-created")
	sums := Sums{}
	listings := map[string][]string{}
	for _, p := range Parts {
		est := previousSize(backupsDir, meta.Machine, p.File)
		fill := func(w io.Writer) error {
			tw, done := progress.TrackEstimate(ctx, "snapshot "+p.Name, est, w)
			err := src(ctx, p.Name, &partWriter{w: tw, lim: lim, dir: backupsDir, part: p.Name})
			done(err)
			return err
		}
		sum, names, err := writePart(ctx, filepath.Join(tmp, p.File), lim, fill)
		if err != nil {
			return "", fmt.Errorf("snapshot of %s: %w", p.Name, err)
		}
		sums[p.File], listings[p.Name] = sum, names
		crashPoint(p.Name + "-written")
	}
	if _, err := writeMeta(tmp, meta, sums, nil, listings); err != nil {
		return "", err
	}
	crashPoint("metadata-written")
	if dir, err = PublishDir(tmp, backupsDir, meta.BaseName()); err != nil {
		return "", err
	}
	crashPoint("published")
	return dir, nil
}

// writeMeta checks the workspace listing against the content rules, then
// writes the small files of a backup whose parts are in dir (the rootfs
// listing, the empty warnings, the manifest of meta), adding their sums
// to sums and, when sizes is not nil, their sizes to it, and SHA256SUMS
// signed by meta.Signer; it syncs dir and returns the manifest.
func writeMeta(dir string, meta Meta, sums Sums, sizes map[string]int64, listings map[string][]string) (Manifest, error) {
	if err := CheckWorkspace(listings[boxlayout.PartWorkspace], false); err != nil {
		return Manifest{}, err
	}
	m := Manifest{Format: Format, Created: meta.Now.UTC().Format(time.RFC3339), Machine: meta.Machine,
		Smolvm: meta.Smolvm, GOOS: meta.GOOS, Fingerprint: keys.Fingerprint(meta.Signer.PublicKey()), AuditAnchor: meta.AuditAnchor}
	small := []struct {
		name string
		data []byte
	}{{FileListing, ListingBytes(listings[boxlayout.PartRootfs])}, {FileWarnings, nil}, {FileManifest, m.Bytes()}}
	for _, f := range small {
		sum, err := writeSmall(filepath.Join(dir, f.name), f.data)
		if err != nil {
			return Manifest{}, err
		}
		sums[f.name] = sum
		if sizes != nil {
			sizes[f.name] = int64(len(f.data))
		}
	}
	if err := writeSigned(dir, sums.Bytes(), meta.Signer); err != nil {
		return Manifest{}, err
	}
	return m, atomicfile.SyncDir(dir)
}

// BaseName is the name a backup of meta is published under, before
// Suffix and any "-N" that keeps it unique.
func (m Meta) BaseName() string {
	return fmt.Sprintf("%s-%s-%s", m.Machine, m.Now.Local().Format("20060102-150405"), SanitizeLabel(m.Label))
}

// previousSize is the size of file in the newest backup of machine in
// dir, the estimate a snapshot's ETA is based on; 0 when there is none.
func previousSize(dir, machine, file string) int64 {
	matches, _ := filepath.Glob(filepath.Join(dir, machine+"-*"+Suffix))
	var newest string
	for _, m := range matches {
		if mm, _, _ := parseName(filepath.Base(m)); mm == machine && m > newest {
			newest = m
		}
	}
	if newest == "" {
		return 0
	}
	fi, err := os.Lstat(filepath.Join(newest, file))
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}

// PublishDir renames tmp to <base>.hermesbox, or <base>-N.hermesbox when
// taken, never replacing anything.
func PublishDir(tmp, parent, base string) (string, error) {
	for n := 1; n <= 1000; n++ {
		name := base
		if n > 1 {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		dst := filepath.Join(parent, name+Suffix)
		err := renameNoReplace(tmp, dst)
		if err == nil {
			return dst, atomicfile.SyncDir(parent)
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("publishing backup: %w", err)
		}
	}
	return "", fmt.Errorf("publishing backup: too many backups named %s", base)
}

// writePart creates path (0600, never an existing file) and fills it with
// what fill writes, hashing and listing the archive on the way.
func writePart(ctx context.Context, path string, lim Limits, fill func(io.Writer) error) (sum string, names []string, err error) {
	list := func(r io.Reader) ([]string, error) { return listArchive(ctx, r, lim) }
	return writeListed(path, list, func(out, listed io.Writer) error { return fill(io.MultiWriter(out, listed)) })
}

// writeListed creates path (0600, never an existing file) and runs fill
// with the file's writer (hashed) and the writer list reads from, at
// once: a failed listing fails fill's writes to listed, so the rest of
// a stream that breaks a limit is not stored.
func writeListed(path string, list func(io.Reader) ([]string, error), fill func(out, listed io.Writer) error) (sum string, names []string, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	h := sha256.New()
	bw := bufio.NewWriterSize(f, 1<<20)
	pr, pw := io.Pipe()
	listed := make(chan error, 1)
	go func() {
		var lerr error
		names, lerr = list(pr)
		if lerr == nil {
			// The archive has ended; what follows it is still hashed
			// and stored, as the verifier will read it.
			_, _ = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(lerr)
		listed <- lerr
	}()
	werr := fill(io.MultiWriter(bw, h), pw)
	pw.CloseWithError(werr)
	lerr := <-listed
	if lerr != nil && (werr == nil || !errors.Is(lerr, werr)) {
		return "", nil, fmt.Errorf("listing %s: %w", filepath.Base(path), lerr)
	}
	if werr != nil {
		return "", nil, werr
	}
	if err := bw.Flush(); err != nil {
		return "", nil, err
	}
	if err := f.Sync(); err != nil {
		return "", nil, err
	}
	return hex.EncodeToString(h.Sum(nil)), names, f.Close()
}

// writeSigned writes SHA256SUMS and its signature.
func writeSigned(dir string, sums []byte, signer ssh.Signer) error {
	sig, err := SignSums(signer, sums)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if _, err := writeSmall(filepath.Join(dir, FileSums), sums); err != nil {
		return err
	}
	_, err = writeSmall(filepath.Join(dir, FileSignature), sig)
	return err
}

func writeSmall(path string, data []byte) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), f.Close()
}

// SanitizeLabel keeps [A-Za-z0-9_.-], turns white space into "-" and
// drops the rest; an empty result is "snapshot".
func SanitizeLabel(label string) string {
	var b strings.Builder
	for _, r := range label {
		switch {
		case r == ' ' || r == '\t' || r == '\n':
			b.WriteByte('-')
		case r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.-", r)):
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "snapshot"
	}
	return b.String()
}
