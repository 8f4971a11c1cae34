package patch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// AnchorCount is how often one anchor occurs in a tree.
type AnchorCount struct {
	File    string `json:"file"`
	Label   string `json:"label"`
	Count   int    `json:"count"`
	Missing bool   `json:"missing,omitempty"` // the file does not exist
}

// SetReport is how one anchor set fits a tree.
type SetReport struct {
	ID      string        `json:"id"`
	Commit  string        `json:"commit"`
	Version string        `json:"version"`
	Anchors []AnchorCount `json:"anchors"`
	// Match is true when every anchor occurs exactly once.
	Match bool `json:"match"`
}

// Report is the result of Check.
type Report struct {
	Dir string `json:"dir"`
	// Version is pyproject.toml's version, when it can be read.
	Version string      `json:"version,omitempty"`
	Sets    []SetReport `json:"sets"`
	// Matching lists the sets that match, those whose pinned version equals
	// Version first.
	Matching []string `json:"matching"`
}

// Check counts every anchor of every supported set in the (unpatched) tree
// at dir. It reads each file once, needs no .git, and writes nothing.
func Check(dir string) (Report, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Report{}, fmt.Errorf("checking anchors: %s is not a directory", dir)
	}
	rep := Report{Dir: dir}
	rep.Version, _ = TreeVersion(dir)
	files := map[string][]byte{}
	missing := map[string]bool{}
	var later []string
	for _, rel := range pins.HermesReleases {
		set, err := SetByID(rel.AnchorSet)
		if err != nil {
			return rep, err
		}
		sr := SetReport{ID: set.ID, Commit: rel.Commit, Version: rel.Version, Match: true}
		for _, a := range set.Anchors {
			src, ok := files[a.File]
			if !ok && !missing[a.File] {
				b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(a.File)))
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return rep, fmt.Errorf("checking anchors: %w", err)
				}
				src, missing[a.File] = b, err != nil
				files[a.File] = b
			}
			ac := AnchorCount{File: a.File, Label: a.Label, Count: a.Count(src), Missing: missing[a.File]}
			sr.Match = sr.Match && ac.Count == 1
			sr.Anchors = append(sr.Anchors, ac)
		}
		rep.Sets = append(rep.Sets, sr)
		switch {
		case !sr.Match:
		case rel.Version == rep.Version:
			rep.Matching = append(rep.Matching, sr.ID)
		default:
			later = append(later, sr.ID)
		}
	}
	rep.Matching = append(rep.Matching, later...)
	return rep, nil
}
