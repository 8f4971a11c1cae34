// Package snapshot is the guest side of snapshot and restore: it writes the
// root file system or the workspace as a gzip tar stream (plain gzip, GNU tar
// reads it) and applies such streams back onto an injectable root.
//
// Entry names follow what `tar -C DIR -czf - .` writes: "./" for the top,
// "./etc/" for directories, "./etc/passwd" for the rest. Owners are numeric
// (no user or group names), modes, times and extended attributes are kept,
// and the walk never leaves the file system of its top directory.
package snapshot

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/klauspost/pgzip"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// rootExcludes are never archived from the root (relative slash paths).
var rootExcludes = []string{
	workspaceInRoot, "proc", "sys", "dev", "run", "storage", "packed_layers", "tmp", readyInRoot,
	boxlayout.InRoot(boxlayout.ChunkCache),
}

// workspaceExcludes are never archived from the workspace: the repullable
// Executor runtime and Codex's scratch space.
var workspaceExcludes = []string{boxlayout.RuntimeDirName, "codex-home/tmp"}

// Spec says what one part archives.
type Spec struct {
	// Dir is the directory archived as "./".
	Dir string
	// Exclude are slash paths relative to Dir left out with everything below.
	Exclude []string
}

// PartSpec returns the spec of a part for the box whose root is root.
func PartSpec(root, part string) (Spec, error) {
	switch part {
	case boxlayout.PartRootfs:
		return Spec{Dir: root, Exclude: rootExcludes}, nil
	case boxlayout.PartWorkspace:
		return Spec{Dir: filepath.Join(root, boxlayout.Workspace), Exclude: workspaceExcludes}, nil
	}
	return Spec{}, fmt.Errorf("unknown snapshot part %q: want %s or %s", part, boxlayout.PartRootfs, boxlayout.PartWorkspace)
}

// Write archives spec.Dir as a gzip tar on w. Any entry that cannot be read
// completely fails the whole part: a backup with holes is not a backup.
func Write(ctx context.Context, w io.Writer, spec Spec) error {
	zw, err := pgzip.NewWriterLevel(w, pgzip.DefaultCompression)
	if err != nil {
		return fmt.Errorf("starting gzip: %w", err)
	}
	// Blocks of 1 MiB, enough in flight to keep every core busy.
	if err := zw.SetConcurrency(1<<20, 2*runtime.GOMAXPROCS(0)); err != nil {
		return fmt.Errorf("configuring gzip: %w", err)
	}
	if err := tarfs.Write(ctx, zw, spec.Dir, tarfs.WriteOptions{Exclude: spec.Exclude}); err != nil {
		_ = zw.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("finishing gzip of %s: %w", spec.Dir, err)
	}
	return nil
}

func statOf(fi os.FileInfo) *syscall.Stat_t {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		panic("snapshot: file info without syscall.Stat_t") // unreachable on Linux
	}
	return st
}
