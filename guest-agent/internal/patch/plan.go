package patch

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

type state int

const (
	stateOriginal state = iota
	statePatched
)

// fileState tells whether src is an original or a fully patched file. Files
// are written whole, so anything in between is an error, as is an anchor
// that does not occur exactly once.
func fileState(file string, src []byte, anchors []Anchor) (state, error) {
	applied := 0
	for _, a := range anchors {
		n := a.Applied(src)
		if n > 1 {
			return 0, &AnchorError{File: file, Label: a.Label, What: "marker", Count: n}
		}
		applied += n
	}
	switch applied {
	case 0:
		return stateOriginal, nil
	case len(anchors):
		for _, a := range anchors {
			if n := bytes.Count(src, []byte(a.PatchedText())); n != 1 {
				return 0, &AnchorError{File: file, Label: a.Label, What: "patched anchor", Count: n}
			}
		}
		return statePatched, nil
	}
	return 0, fmt.Errorf("%s: %d of %d hunks present: the file was edited by hand", file, applied, len(anchors))
}

// planTree computes every output in memory: the module (first) and each
// original file with its anchors applied. Files already patched by an
// interrupted run are left alone.
func planTree(dir string, set Set) ([]plannedFile, error) {
	var plan []plannedFile
	modPath := filepath.Join(dir, filepath.FromSlash(ModulePath))
	if cur, err := os.ReadFile(modPath); set.Reviewer && (err != nil || !bytes.Equal(cur, module)) {
		like, _ := os.Stat(filepath.Dir(modPath))
		plan = append(plan, plannedFile{rel: ModulePath, data: module, like: moduleLike(like)})
	}
	for _, file := range set.Files() {
		path := filepath.Join(dir, filepath.FromSlash(file))
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("planning patch: %w", err)
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("planning patch: %w", err)
		}
		st, err := fileState(file, src, set.For(file))
		if err != nil {
			return nil, err
		}
		if st == statePatched {
			continue
		}
		out := src
		for _, a := range set.For(file) {
			if out, err = a.Apply(out); err != nil {
				return nil, err
			}
		}
		plan = append(plan, plannedFile{rel: file, data: out, like: fi})
	}
	return plan, nil
}

// moduleLike gives the module the owner of its directory and mode 0644.
func moduleLike(dir fs.FileInfo) fs.FileInfo {
	if dir == nil {
		return nil
	}
	return modeInfo{FileInfo: dir, mode: 0o644}
}

type modeInfo struct {
	fs.FileInfo
	mode fs.FileMode
}

func (m modeInfo) Mode() fs.FileMode { return m.mode }

func (p *Patcher) write(path string, data []byte, like fs.FileInfo) error {
	if p.writeFile != nil {
		return p.writeFile(path, data, like)
	}
	return atomicfile.WriteLike(path, data, like, 0o644)
}

// validate byte-compiles the edited files and runs the reviewer's
// regression suite against the patched tree.
func (p *Patcher) validate(ctx context.Context, dir string, set Set) error {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	scratch, err := os.MkdirTemp("", "hermes-box-gate-")
	if err != nil {
		return fmt.Errorf("validating patched tree: %w", err)
	}
	defer os.RemoveAll(scratch)
	var files []string
	if set.Reviewer {
		files = append(files, filepath.Join(dir, filepath.FromSlash(ModulePath)))
	}
	for _, f := range set.Files() {
		files = append(files, filepath.Join(dir, filepath.FromSlash(f)))
	}
	run := p.Runner
	if run == nil {
		run = command.ExecRunner{}
	}
	python := p.python(dir)
	// The byte code goes to the scratch dir, so the tree holds only our edits.
	compile := command.Command{Path: python, Args: append([]string{"-m", "py_compile"}, files...), Dir: dir, Timeout: timeout,
		Env: []string{"PYTHONPYCACHEPREFIX=" + filepath.Join(scratch, "pycache")}}
	if _, err := run.Run(ctx, compile); err != nil {
		return fmt.Errorf("byte-compiling patched files: %w", err)
	}
	if !set.Reviewer {
		return nil
	}
	suiteDir := filepath.Join(scratch, "suite")
	if err := os.Mkdir(suiteDir, 0o700); err != nil {
		return fmt.Errorf("validating patched tree: %w", err)
	}
	if err := os.WriteFile(filepath.Join(suiteDir, "test_gated_approval.py"), suite, 0o600); err != nil {
		return fmt.Errorf("validating patched tree: %w", err)
	}
	integration := "0"
	if p.Integration {
		integration = "1"
	}
	test := command.Command{Path: python, Timeout: timeout, Args: []string{"-m", "unittest", "discover", "-s", suiteDir, "-p", "test_gated_approval.py"}, Dir: suiteDir,
		Env: []string{"HERMES_GATE_MODULE=" + files[0], "HERMES_GATE_SOURCE=" + dir, "HERMES_GATE_INTEGRATION=" + integration,
			"HERMES_HOME=" + filepath.Join(scratch, "home"), "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1"}}
	if _, err := run.Run(ctx, test); err != nil {
		return fmt.Errorf("reviewer regression suite failed against %s: %w", dir, err)
	}
	return nil
}

func (p *Patcher) python(dir string) string {
	if p.Python != "" {
		return p.Python
	}
	venv := filepath.Join(dir, "venv", "bin", "python")
	if _, err := os.Stat(venv); err == nil {
		return venv
	}
	return "python3"
}
