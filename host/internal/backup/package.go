package backup

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/shared/filenames"
)

// portablePrefix names the temp files of a package; Reap removes stale ones.
const portablePrefix = ".hermes-box-portable-"

// PackFile is one host file placed in the package.
type PackFile struct {
	// Name is the slash path below "hermes-box/" in the archive.
	Name string
	// Path is the file on the host; it must be a regular file.
	Path string
	Mode fs.FileMode
}

// GenFile is a file of the package written from memory.
type GenFile struct {
	Name string // slash path below "hermes-box/"
	Data []byte
	Mode fs.FileMode
}

// Package describes a portable restore archive.
type Package struct {
	// Project are the project files needed to run (binaries, Smolfile, …).
	Project []PackFile
	// BaseArtifact is images/hermes-base.smolmachine.
	BaseArtifact string
	// Backup is the verified backup to include, as BackupName.
	Backup     *Verified
	BackupName string
	// Config is the generated hermes-box.conf (data dir and key path
	// cleared: the key travels in state/).
	Config []byte
	// Generated are further files written from memory (the restore notes,
	// portable.json).
	Generated []GenFile
	Label     string
	Now       time.Time
}

// Write builds the archive in a temp file in backupsDir, then publishes it
// and its .sha256 without replacing anything that exists. It returns the
// archive's path.
func (p *Package) Write(ctx context.Context, backupsDir string) (archive string, err error) {
	f, err := os.CreateTemp(backupsDir, portablePrefix+"*.tar.tmp")
	if err != nil {
		return "", fmt.Errorf("creating package: %w", err)
	}
	tmp := f.Name()
	defer func() {
		_ = f.Close()
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return "", fmt.Errorf("creating package: %w", err)
	}
	h := sha256.New()
	w, done := progress.Track(ctx, "package", p.size(), io.MultiWriter(f, h))
	err = p.fill(ctx, w)
	done(err)
	if err != nil {
		return "", fmt.Errorf("writing package: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("writing package: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing package: %w", err)
	}
	base := fmt.Sprintf("hermes-box-portable-%s-%s", p.Now.Local().Format("20060102-150405"), SanitizeLabel(p.Label))
	archive, err = publishFile(tmp, backupsDir, base)
	if err != nil {
		return "", err
	}
	if err := writeChecksum(backupsDir, archive, h); err != nil {
		return archive, fmt.Errorf("archive retained at %s: %w", archive, err)
	}
	return archive, nil
}

// publishFile renames tmp to base[-N].tar, skipping names where either the
// .tar or its .tar.sha256 exists.
func publishFile(tmp, dir, base string) (string, error) {
	for n := 1; n <= 1000; n++ {
		name := base
		if n > 1 {
			name = fmt.Sprintf("%s-%d", base, n)
		}
		dst := filepath.Join(dir, name+".tar")
		if _, err := os.Lstat(dst + ".sha256"); err == nil {
			continue
		}
		err := renameNoReplace(tmp, dst)
		if err == nil {
			return dst, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("publishing package: %w", err)
		}
	}
	return "", fmt.Errorf("publishing package: too many packages named %s", base)
}

func writeChecksum(dir, archive string, h hash.Hash) error {
	f, err := os.CreateTemp(dir, portablePrefix+"*.sha256.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = fmt.Fprintf(f, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.Base(archive))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = renameNoReplace(tmp, archive+".sha256")
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// size estimates the archive's size: its files' sizes (the tar headers
// add a little).
func (p *Package) size() int64 {
	var n int64
	add := func(path string) {
		if fi, err := os.Stat(path); err == nil {
			n += fi.Size()
		}
	}
	for _, pf := range p.Project {
		add(pf.Path)
	}
	add(p.BaseArtifact)
	for _, name := range p.backupFiles() {
		add(filepath.Join(p.Backup.Dir, name))
	}
	for _, g := range p.Generated {
		n += int64(len(g.Data))
	}
	return n + int64(len(p.Config))
}

// backupFiles are the backup's files the package carries.
func (p *Package) backupFiles() []string {
	names := append(slices.Clone(Files), FileSums)
	if p.Backup.Signer != nil {
		names = append(names, FileSignature)
	}
	return names
}

func (p *Package) fill(ctx context.Context, w io.Writer) error {
	tw := tar.NewWriter(w)
	now := p.Now.Truncate(time.Second)
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "hermes-box/" + name, Mode: 0o700, ModTime: now})
	}
	if err := dir(""); err != nil {
		return err
	}
	seen := map[string]bool{filenames.ImagesDir: true, filenames.BackupsDir: true, filenames.StateDir: true, filenames.BackupsDir + "/" + p.BackupName: true}
	names := make([]string, 0, len(p.Project)+len(p.Generated))
	for _, pf := range p.Project {
		names = append(names, pf.Name)
	}
	for _, g := range p.Generated {
		names = append(names, g.Name)
	}
	for _, n := range names {
		for d := path.Dir(n); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
		}
	}
	for _, d := range sortedKeys(seen) {
		if err := dir(d + "/"); err != nil {
			return err
		}
	}
	for _, pf := range p.Project {
		if err := addFile(ctx, tw, "hermes-box/"+pf.Name, pf.Path, pf.Mode, now); err != nil {
			return err
		}
	}
	if err := addBytes(tw, "hermes-box/hermes-box.conf", p.Config, 0o600, now); err != nil {
		return err
	}
	for _, g := range p.Generated {
		if err := addBytes(tw, "hermes-box/"+g.Name, g.Data, g.Mode, now); err != nil {
			return err
		}
	}
	if err := addFile(ctx, tw, "hermes-box/"+filenames.ImagesDir+"/"+filenames.BaseArtifact, p.BaseArtifact, 0o600, now); err != nil {
		return err
	}
	for _, name := range p.backupFiles() {
		if err := addFile(ctx, tw, "hermes-box/backups/"+p.BackupName+"/"+name, filepath.Join(p.Backup.Dir, name), 0o600, now); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(ctx context.Context, tw *tar.Writer, name, src string, mode fs.FileMode, now time.Time) error {
	f, fi, err := openRegular(src)
	if err != nil {
		return fmt.Errorf("adding %s: %w", src, err)
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: int64(mode.Perm()), ModTime: now}); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, ctxReader{ctx, f}, fi.Size()); err != nil {
		return fmt.Errorf("adding %s: %w", src, err)
	}
	return nil
}

func addBytes(tw *tar.Writer, name string, data []byte, mode fs.FileMode, now time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: int64(mode.Perm()), ModTime: now}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func sortedKeys(m map[string]bool) []string {
	out := slices.Collect(maps.Keys(m))
	slices.Sort(out) // parents sort before their children
	return out
}
