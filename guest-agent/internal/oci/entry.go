package oci

import (
	"fmt"
	"path/filepath"
)

// Entry is how the active release starts: its own bun, by absolute path
// (never looked up on PATH), running the layout's entry in the selfhost
// app's directory. The supervisor program around it is the executor's.
type Entry struct {
	Command []string
	Dir     string
}

// ActiveEntry returns the Entry of the active release under runtimeRoot,
// for the layout the release holds. It resolves `current` now, so a later
// activation takes effect at the next (re)start and never swaps files
// under a running process.
func ActiveEntry(runtimeRoot string) (Entry, error) {
	s := &Store{Root: runtimeRoot}
	r, err := s.Current()
	if err != nil {
		return Entry{}, fmt.Errorf("executor entry: %w", err)
	}
	if r == nil {
		return Entry{}, fmt.Errorf("executor entry: no active release under %s (run `hermes-box-agent executor pull --activate`)", runtimeRoot)
	}
	layout, err := checkPayload(r.Dir)
	if err != nil {
		return Entry{}, fmt.Errorf("executor entry: %w", err)
	}
	return Entry{
		Command: []string{filepath.Join(r.Dir, bunPath), "run", layout.Entry()},
		Dir:     filepath.Join(r.Dir, selfhostDir),
	}, nil
}
