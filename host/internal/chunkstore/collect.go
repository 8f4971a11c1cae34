package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/backup"
)

// Backups lists the incremental backups of machine in backupsDir (by
// their records, each checked against t), in name order.
func Backups(backupsDir, machine string, t backup.Trust) (dirs []string, recs []*Record, err error) {
	entries, err := os.ReadDir(backupsDir)
	if err != nil {
		return nil, nil, fmt.Errorf("listing backups: %w", err)
	}
	for _, e := range entries {
		dir := filepath.Join(backupsDir, e.Name())
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".hermesbox") || !IsIncremental(dir) {
			continue
		}
		rec, err := Load(dir, t)
		if err != nil {
			return nil, nil, err
		}
		if rec.Machine == machine {
			dirs, recs = append(dirs, dir), append(recs, rec)
		}
	}
	return dirs, recs, nil
}

// Collect removes from machine's store every chunk that no incremental
// backup of it needs (their records checked against t). A backup whose record does not load or whose
// chunks are not all held stops the collection before anything is
// removed: `backups repair` and `backups --verify` say more. The caller
// holds the operation lock.
func Collect(ctx context.Context, backupsDir, machine string, t backup.Trust) (GCReport, error) {
	if _, err := ReapTemps(backupsDir); err != nil {
		return GCReport{}, err
	}
	dirs, recs, err := Backups(backupsDir, machine, t)
	if err != nil {
		return GCReport{}, fmt.Errorf("collecting garbage: %w", err)
	}
	s, err := Open(StoreDir(backupsDir, machine))
	if err != nil {
		return GCReport{}, fmt.Errorf("collecting garbage: %w", err)
	}
	defer s.Close()
	m, err := markBackups(ctx, s, dirs, recs, nil)
	if err != nil {
		return GCReport{}, err
	}
	return s.GC(m)
}

// PlanCollect is the report Collect would return once the backups dirs
// gone are deleted (a prune's dry run), with nothing changed: the same
// marks and the same plan GC follows (PlanGC). The caller holds the
// operation lock, so that nothing changes between the two.
func PlanCollect(ctx context.Context, backupsDir, machine string, t backup.Trust, gone map[string]bool) (GCReport, error) {
	dirs, recs, err := Backups(backupsDir, machine, t)
	if err != nil {
		return GCReport{}, fmt.Errorf("planning the collection: %w", err)
	}
	s, err := OpenReader(StoreDir(backupsDir, machine))
	if err != nil {
		return GCReport{}, fmt.Errorf("planning the collection: %w", err)
	}
	defer s.Close()
	m, err := markBackups(ctx, s, dirs, recs, gone)
	if err != nil {
		return GCReport{}, err
	}
	return s.PlanGC(m)
}

// markBackups marks the chunks of every backup of recs but those gone
// names.
func markBackups(ctx context.Context, s *Store, dirs []string, recs []*Record, gone map[string]bool) (*Marks, error) {
	m := s.NewMarks()
	for i, rec := range recs {
		if gone[dirs[i]] {
			continue
		}
		if err := s.Mark(ctx, rec, m); err != nil {
			return nil, fmt.Errorf("collecting garbage: backup %s: %w", dirs[i], err)
		}
	}
	return m, nil
}

// Machines are the machines that have a store below backupsDir.
func Machines(backupsDir string) ([]string, error) {
	des, err := os.ReadDir(filepath.Join(backupsDir, storesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing chunk stores: %w", err)
	}
	var out []string
	for _, de := range des {
		if de.IsDir() {
			out = append(out, de.Name())
		}
	}
	return out, nil
}
