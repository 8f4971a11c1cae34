package gate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Found is how often one requirement occurs in a tree.
type Found struct {
	Requirement
	Count   int  `json:"count"`
	Missing bool `json:"missing,omitempty"` // the file does not exist
}

// Report is the result of Check.
type Report struct {
	Dir     string `json:"dir"`
	Version string `json:"version"`
	// Commit and Mechanism come from the pins row of Version.
	Commit    string             `json:"commit,omitempty"`
	Mechanism pins.GateMechanism `json:"mechanism,omitempty"`
	Accepted  bool               `json:"accepted"`
	// Reason says why the tree is refused.
	Reason string  `json:"reason,omitempty"`
	Found  []Found `json:"requirements,omitempty"`
}

// Check tells whether the (unpatched) Hermes tree at dir takes the gate: its
// version must be a supported release and every requirement of that
// release's mechanism must occur exactly once. It writes nothing. An error
// means the tree could not be read at all.
func Check(dir string) (Report, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Report{}, fmt.Errorf("checking Hermes tree: %s is not a directory", dir)
	}
	v, err := patch.TreeVersion(dir)
	if err != nil {
		return Report{}, fmt.Errorf("checking Hermes tree: %w", err)
	}
	rep := Report{Dir: dir, Version: v}
	rel, err := pins.HermesByVersion(v)
	if err != nil {
		rep.Reason = err.Error()
		return rep, nil
	}
	rep.Commit, rep.Mechanism = rel.Commit, rel.Mechanism
	reqs, err := Requirements(rel)
	if err != nil {
		return rep, err
	}
	files := map[string][]byte{}
	drift := 0
	for _, r := range reqs {
		src, ok := files[r.File]
		if !ok {
			src, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(r.File)))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return rep, fmt.Errorf("checking Hermes tree: %w", err)
			}
			files[r.File] = src
		}
		f := Found{Requirement: r, Count: bytes.Count(src, []byte(r.Text)), Missing: src == nil}
		if f.Count != 1 {
			drift++
		}
		rep.Found = append(rep.Found, f)
	}
	rep.Accepted = drift == 0
	if !rep.Accepted {
		rep.Reason = fmt.Sprintf("%d of %d things the %s mechanism relies on do not occur exactly once (upstream drift: this is not the tree the mechanism was written for)",
			drift, len(reqs), rel.Mechanism)
	}
	return rep, nil
}
