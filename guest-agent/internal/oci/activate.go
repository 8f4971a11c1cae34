package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Activate switches `current` to the release holding ref, which must have
// been pulled already.
func (s *Store) Activate(ctx context.Context, ref Reference) (*Release, error) {
	l, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Release() //nolint:errcheck // the lock goes with the file
	r := s.findUsable(ref)
	if r == nil {
		return nil, fmt.Errorf("no complete release holds %s: pull it first", ref.Canonical())
	}
	return r, s.activate(ctx, r, ref)
}

// activate re-checks r, records the reference it was activated for, swaps
// the `current` symlink by rename and prunes what is no longer needed: the
// previous release stays for a rollback, older ones and blob caches go.
func (s *Store) activate(ctx context.Context, r *Release, ref Reference) error {
	if err := CheckPayload(r.Dir); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(r.Dir, metaImageReference), []byte(ref.String()+"\n"), 0o644); err != nil {
		return err
	}
	r.ImageReference = ref.String()
	previous, _ := s.Current()
	if err := s.swapCurrent("releases/" + r.Name); err != nil {
		return err
	}
	s.emit(protocol.LevelInfo, "activated "+r.Name+" for "+ref.String())
	keep := map[string]bool{r.Name: true}
	if previous != nil {
		keep[previous.Name] = true
	}
	return s.prune(keep)
}

// swapCurrent points `current` at target: a symlink at a temp name in the
// same directory, renamed over the old one, so readers see the old or the
// new link and never none.
func (s *Store) swapCurrent(target string) error {
	tmp := filepath.Join(s.Root, ".current-"+strconv.Itoa(os.Getpid()))
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	cur := s.currentLink()
	if fi, err := os.Lstat(cur); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		aside, err := os.MkdirTemp(s.releasesDir(), ".obsolete-")
		if err == nil {
			err = os.Rename(cur, filepath.Join(aside, "current"))
		}
		if err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("moving the non-symlink %s aside: %w", cur, err)
		}
	}
	if err := os.Rename(tmp, cur); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("switching %s: %w", cur, err)
	}
	return atomicfile.SyncDir(s.Root)
}

// prune removes releases not in keep, obsolete trees and blob caches.
func (s *Store) prune(keep map[string]bool) error {
	ents, err := os.ReadDir(s.releasesDir())
	if err != nil {
		return fmt.Errorf("listing releases: %w", err)
	}
	for _, e := range ents {
		if keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.releasesDir(), e.Name())); err != nil {
			return fmt.Errorf("pruning release %s: %w", e.Name(), err)
		}
	}
	return removeGlob(s.Root, ".oci-cache-*")
}
