package patch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// MarkerFile is written last, in the tree's root, once a tree is patched.
const MarkerFile = ".hermes-box-gated-approval"

// DefaultTimeout bounds byte-compiling and the regression suite together.
const DefaultTimeout = 5 * time.Minute

// Patcher applies an anchor set to a Hermes tree.
type Patcher struct {
	Runner command.Runner // nil means ExecRunner
	// Python runs py_compile and the suite; "" means the tree's
	// venv/bin/python when present, else python3.
	Python  string
	Timeout time.Duration // 0 means DefaultTimeout
	// Integration also drives the patched tools.approval in the suite; it
	// needs Hermes' own interpreter and dependencies.
	Integration bool
	// writeFile replaces a file atomically; tests inject failures here.
	writeFile func(path string, data []byte, like fs.FileInfo) error
}

// Result says what Patch did.
type Result struct {
	Commit, Version, Set string
	// Written lists the files written, relative to the tree; empty when the
	// tree was already patched.
	Written        []string
	AlreadyPatched bool
}

// plannedFile is one output computed before anything is written.
type plannedFile struct {
	rel  string
	data []byte
	like fs.FileInfo // mode and owner to keep; nil for a new file
}

// Patch verifies that dir holds commit (a pinned Hermes release) and patches
// it, or verifies an already patched tree without changing it.
func (p *Patcher) Patch(ctx context.Context, dir, commit string) (Result, error) {
	rel, set, err := CheckTree(dir, commit)
	if err != nil {
		return Result{}, err
	}
	res := Result{Commit: rel.Commit, Version: rel.Version, Set: set.ID}
	want := markerContent(rel, set)
	_, err = os.Stat(filepath.Join(dir, MarkerFile))
	switch {
	case err == nil:
		res.AlreadyPatched = true
		return res, verifyPatched(dir, rel, set)
	case !errors.Is(err, fs.ErrNotExist):
		return res, fmt.Errorf("reading patch marker: %w", err)
	}
	plan, err := planTree(dir, set)
	if err != nil {
		return res, err
	}
	for _, f := range plan {
		if err := p.write(filepath.Join(dir, filepath.FromSlash(f.rel)), f.data, f.like); err != nil {
			return res, fmt.Errorf("patching %s: %w", f.rel, err)
		}
		res.Written = append(res.Written, f.rel)
	}
	if err := p.validate(ctx, dir, set); err != nil {
		return res, err
	}
	if err := p.write(filepath.Join(dir, MarkerFile), want, nil); err != nil {
		return res, fmt.Errorf("writing patch marker: %w", err)
	}
	res.Written = append(res.Written, MarkerFile)
	return res, nil
}

// CheckTree refuses a tree that is not exactly the pinned release of
// commit, and returns that release and its anchor set.
func CheckTree(dir, commit string) (pins.HermesRelease, Set, error) {
	rel, err := pins.Hermes(commit)
	if err != nil {
		return rel, Set{}, err
	}
	set, err := SetByID(rel.AnchorSet)
	if err != nil {
		return rel, set, err
	}
	got, err := TreeCommit(dir)
	if err != nil {
		return rel, set, err
	}
	if got != rel.Commit {
		return rel, set, fmt.Errorf("%s holds Hermes commit %s, want %s (%s): refusing to patch", dir, got, rel.Commit, rel.Version)
	}
	v, err := TreeVersion(dir)
	if err != nil {
		return rel, set, err
	}
	if v != rel.Version {
		return rel, set, fmt.Errorf("%s: pyproject.toml says version %q, want %q for commit %s: refusing to patch", dir, v, rel.Version, rel.Commit)
	}
	return rel, set, nil
}

func markerContent(rel pins.HermesRelease, set Set) []byte {
	return fmt.Appendf(nil, "commit=%s\nanchor_set=%s\nmodule_sha256=%s\n", rel.Commit, set.ID, ModuleSHA256())
}

// VerifyInputs lists the files, relative to a tree, whose bytes decide
// whether a marked tree of the set verifies (VerifyMarked): the marker,
// the reviewer module where the set has one, and the files it edits.
func (s Set) VerifyInputs() []string {
	files := []string{MarkerFile}
	if s.Reviewer {
		files = append(files, ModulePath)
	}
	return append(files, s.Files()...)
}

// verifyPatched checks the marked tree at dir (VerifyMarked). It writes
// nothing.
func verifyPatched(dir string, rel pins.HermesRelease, set Set) error {
	files := map[string][]byte{}
	for _, f := range set.VerifyInputs() {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return fmt.Errorf("verifying patched tree: %w", err)
		}
		files[f] = b
	}
	return VerifyMarked(dir, rel, set, files)
}

// VerifyMarked checks a marked tree of rel at dir from the bytes of the
// set's VerifyInputs (files, by the same names): marker, module bytes, and
// every anchor and hunk marker exactly once; the result depends on nothing
// else.
func VerifyMarked(dir string, rel pins.HermesRelease, set Set, files map[string][]byte) error {
	if have, want := files[MarkerFile], markerContent(rel, set); !bytes.Equal(have, want) {
		return fmt.Errorf("%s: marker is %q, want %q: the tree was patched by a different hermes-box; reinstall Hermes", filepath.Join(dir, MarkerFile), have, want)
	}
	if set.Reviewer && !bytes.Equal(files[ModulePath], module) {
		return fmt.Errorf("%s: installed reviewer module differs from this agent's (sha256 %s)", ModulePath, ModuleSHA256())
	}
	for _, file := range set.Files() {
		if st, err := fileState(file, files[file], set.For(file)); err != nil || st != statePatched {
			return errors.Join(fmt.Errorf("%s: marked as patched but the file is not", file), err)
		}
	}
	return nil
}
