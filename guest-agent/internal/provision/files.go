package provision

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// Owner changes and reads the owner of a path without following symlinks.
type Owner interface {
	Lchown(path string, uid, gid int) error
	Owner(path string) (uid, gid int, err error)
}

// SystemOwner is the real Owner.
type SystemOwner struct{}

// Lchown changes the owner of path itself.
func (SystemOwner) Lchown(path string, uid, gid int) error { return os.Lchown(path, uid, gid) }

// Owner reads the owner of path itself.
func (SystemOwner) Owner(path string) (int, int, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("no owner information for %s", path)
	}
	return int(st.Uid), int(st.Gid), nil
}

// rootID is root's uid and gid; the box's own accounts are boxlayout's.
const rootID = 0

// file is a file the provisioner owns completely.
type file struct {
	Path     string // guest path
	Data     []byte
	Mode     fs.FileMode
	UID, GID int
}

// dir is a directory with a fixed mode and owner.
type dir struct {
	Path     string
	Mode     fs.FileMode
	UID, GID int
}

// link is a symlink with a fixed target.
type link struct {
	Path     string
	Target   string
	UID, GID int
}

// fileStatus lists what differs between the file on disk and f.
func (p *Provisioner) fileStatus(f file) ([]string, error) {
	path := p.path(f.Path)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{"write " + f.Path}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", f.Path, err)
	}
	if !fi.Mode().IsRegular() {
		return []string{"replace " + f.Path + " (not a regular file)"}, nil
	}
	var out []string
	got, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Path, err)
	}
	if !bytes.Equal(got, f.Data) {
		out = append(out, "rewrite "+f.Path)
	}
	out = append(out, p.attrStatus(f.Path, fi, f.Mode, f.UID, f.GID)...)
	return out, nil
}

func (p *Provisioner) attrStatus(guest string, fi fs.FileInfo, mode fs.FileMode, uid, gid int) []string {
	var out []string
	if fi.Mode().Perm() != mode.Perm() {
		out = append(out, fmt.Sprintf("chmod %04o %s", mode.Perm(), guest))
	}
	if u, g, err := p.cfg.Owner.Owner(p.path(guest)); err != nil || u != uid || g != gid {
		out = append(out, fmt.Sprintf("chown %d:%d %s", uid, gid, guest))
	}
	return out
}

// writeFile puts f in place atomically with its mode and owner. The parent
// directory is created root-owned 0755 when missing.
func (p *Provisioner) writeFile(f file) error {
	path := p.path(f.Path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", f.Path, err)
	}
	if err := atomicfile.Write(path, f.Data, f.Mode.Perm()); err != nil {
		return err
	}
	return p.setAttrs(f.Path, f.Mode, f.UID, f.GID)
}

func (p *Provisioner) setAttrs(guest string, mode fs.FileMode, uid, gid int) error {
	path := p.path(guest)
	if err := os.Chmod(path, mode.Perm()); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", guest, err)
	}
	if err := p.cfg.Owner.Lchown(path, uid, gid); err != nil {
		return fmt.Errorf("setting the owner of %s: %w", guest, err)
	}
	return nil
}

func (p *Provisioner) dirStatus(d dir) ([]string, error) {
	fi, err := os.Lstat(p.path(d.Path))
	if errors.Is(err, fs.ErrNotExist) {
		return []string{"create " + d.Path}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", d.Path, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s exists and is not a directory", d.Path)
	}
	return p.attrStatus(d.Path, fi, d.Mode, d.UID, d.GID), nil
}

func (p *Provisioner) ensureDir(d dir) error {
	if err := os.MkdirAll(p.path(d.Path), d.Mode.Perm()); err != nil {
		return fmt.Errorf("creating %s: %w", d.Path, err)
	}
	return p.setAttrs(d.Path, d.Mode, d.UID, d.GID)
}

func (p *Provisioner) linkStatus(l link) ([]string, error) {
	target, err := os.Readlink(p.path(l.Path))
	if errors.Is(err, fs.ErrNotExist) {
		return []string{"link " + l.Path + " -> " + l.Target}, nil
	}
	if err != nil || target != l.Target {
		return []string{"relink " + l.Path + " -> " + l.Target}, nil
	}
	if u, g, err := p.cfg.Owner.Owner(p.path(l.Path)); err != nil || u != l.UID || g != l.GID {
		return []string{fmt.Sprintf("chown %d:%d %s", l.UID, l.GID, l.Path)}, nil
	}
	return nil, nil
}

// ensureLink points l.Path at l.Target atomically: a new link under a temp
// name, renamed over the old one.
func (p *Provisioner) ensureLink(l link) error {
	path := p.path(l.Path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", l.Path, err)
	}
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory; refusing to replace it with a link", l.Path)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".link-new")
	_ = os.Remove(tmp)
	if err := os.Symlink(l.Target, tmp); err != nil {
		return fmt.Errorf("linking %s: %w", l.Path, err)
	}
	if err := p.cfg.Owner.Lchown(tmp, l.UID, l.GID); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("setting the owner of %s: %w", l.Path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("linking %s: %w", l.Path, err)
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}

// collect gathers the pending changes of files, dirs and links in order.
func (p *Provisioner) collect(dirs []dir, files []file, links []link) ([]string, error) {
	var out []string
	for _, d := range dirs {
		s, err := p.dirStatus(d)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	for _, f := range files {
		s, err := p.fileStatus(f)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	for _, l := range links {
		s, err := p.linkStatus(l)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}

// put applies dirs, files and links in order.
func (p *Provisioner) put(dirs []dir, files []file, links []link) error {
	for _, d := range dirs {
		if err := p.ensureDir(d); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := p.writeFile(f); err != nil {
			return err
		}
	}
	for _, l := range links {
		if err := p.ensureLink(l); err != nil {
			return err
		}
	}
	return nil
}
