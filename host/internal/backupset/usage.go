package backupset

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// PortablePrefix starts the name of a portable package hermes-box writes
// into the backups directory (backup.WritePackage).
const PortablePrefix = "hermes-box-portable-"

// Usage is what the backups directory holds on disk, by kind: the sum of
// the regular files' sizes.
type Usage struct {
	// Stores is the chunk stores (backups/.chunks), every machine's.
	Stores int64 `json:"stores"`
	// V2 is the self-contained hermes-box-v2 backups' directories.
	V2 int64 `json:"v2"`
	// Records is the incremental backups' directories (their signed
	// records; their data is in Stores).
	Records int64 `json:"records"`
	// Files are the exports and portable packages hermes-box wrote here,
	// each with its .sha256, and FilesBytes their sum.
	Files      []File `json:"files"`
	FilesBytes int64  `json:"files_bytes"`
}

// File is one export or package of the backups directory.
type File struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Size int64  `json:"size"` // with its .sha256
}

// Total is every byte of the backups directory Usage counts.
func (u Usage) Total() int64 { return u.Stores + u.V2 + u.Records + u.FilesBytes }

// DiskUsage adds up the backups directory dir: the chunk stores, the
// backups' directories and the exports and packages hermes-box wrote
// (backup.ExportPrefix, PortablePrefix). Files of other names are not
// counted.
func DiskUsage(dir string) (Usage, error) {
	var u Usage
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return u, fmt.Errorf("adding up %s: %w", dir, err)
	}
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		switch {
		case de.IsDir() && de.Name() == filepath.Base(chunkstore.StoreDir("", "")):
			u.Stores += treeSize(p)
		case de.IsDir() && strings.HasSuffix(de.Name(), backup.Suffix) && chunkstore.IsIncremental(p):
			u.Records += treeSize(p)
		case de.IsDir() && strings.HasSuffix(de.Name(), backup.Suffix):
			u.V2 += treeSize(p)
		case de.Type().IsRegular() && isExportOrPackage(de.Name()):
			u.Files = append(u.Files, File{Name: de.Name(), Path: p, Size: fileSize(p) + fileSize(p+".sha256")})
		}
	}
	for _, f := range u.Files {
		u.FilesBytes += f.Size
	}
	return u, nil
}

// isExportOrPackage reports the name of an export's or a package's tar.
func isExportOrPackage(name string) bool {
	return strings.HasSuffix(name, ".tar") &&
		(strings.HasPrefix(name, backup.ExportPrefix) || strings.HasPrefix(name, PortablePrefix))
}

// treeSize is the sum of the regular files' sizes below dir, not
// following symbolic links.
func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func fileSize(p string) int64 {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}
