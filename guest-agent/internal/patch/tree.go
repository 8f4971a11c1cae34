package patch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// SourceMarker is the file in a Hermes tree that records the commit it was
// installed from, for trees whose .git has been removed.
const SourceMarker = ".hermes-box-source"

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// WriteSourceMarker records commit as the commit the tree at dir holds.
func WriteSourceMarker(dir, commit string) error {
	if !commitRE.MatchString(commit) {
		return fmt.Errorf("writing %s: %q is not a full commit id", SourceMarker, commit)
	}
	return atomicfile.Write(filepath.Join(dir, SourceMarker), []byte("commit="+commit+"\n"), 0o644)
}

// TreeCommit returns the commit the Hermes tree at dir holds, from .git/HEAD
// and/or SourceMarker (which must agree when both exist).
func TreeCommit(dir string) (string, error) {
	fromGit, gitErr := gitHead(dir)
	fromMarker, markerErr := sourceMarker(dir)
	switch {
	case gitErr != nil && !errors.Is(gitErr, fs.ErrNotExist):
		return "", gitErr
	case markerErr != nil && !errors.Is(markerErr, fs.ErrNotExist):
		return "", markerErr
	case fromGit != "" && fromMarker != "" && fromGit != fromMarker:
		return "", fmt.Errorf("%s: .git/HEAD is at %s but %s records %s", dir, fromGit, SourceMarker, fromMarker)
	case fromGit != "":
		return fromGit, nil
	case fromMarker != "":
		return fromMarker, nil
	}
	return "", fmt.Errorf("%s: cannot tell which Hermes commit this tree holds: no .git/HEAD and no %s", dir, SourceMarker)
}

func sourceMarker(dir string) (string, error) {
	path := filepath.Join(dir, SourceMarker)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	c, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "commit=")
	if !ok || !commitRE.MatchString(c) {
		return "", fmt.Errorf("%s: want one line commit=<40 hex digits>", path)
	}
	return c, nil
}

// gitDir resolves dir/.git, following a "gitdir:" file.
func gitDir(dir string) (string, error) {
	p := filepath.Join(dir, ".git")
	fi, err := os.Stat(p)
	if err != nil || fi.IsDir() {
		return p, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", fmt.Errorf("%s: not a gitdir file", p)
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target)
	}
	return target, nil
}

func gitHead(dir string) (string, error) {
	gd, err := gitDir(dir)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(gd, "HEAD"))
	if err != nil {
		return "", err
	}
	head := strings.TrimSpace(string(b))
	if commitRE.MatchString(head) {
		return head, nil
	}
	ref, ok := strings.CutPrefix(head, "ref: ")
	if !ok || !strings.HasPrefix(ref, "refs/") || strings.Contains(ref, "..") {
		return "", fmt.Errorf("%s/HEAD: unrecognised content %q", gd, head)
	}
	return resolveRef(gd, ref)
}

func resolveRef(gd, ref string) (string, error) {
	if b, err := os.ReadFile(filepath.Join(gd, filepath.FromSlash(ref))); err == nil {
		if c := strings.TrimSpace(string(b)); commitRE.MatchString(c) {
			return c, nil
		}
		return "", fmt.Errorf("%s/%s: not a commit id", gd, ref)
	}
	f, err := os.Open(filepath.Join(gd, "packed-refs"))
	if err != nil {
		return "", fmt.Errorf("%s: HEAD names %s, which is neither a loose nor a packed ref", gd, ref)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && commitRE.MatchString(id) {
			return id, nil
		}
	}
	return "", fmt.Errorf("%s: HEAD names %s, which packed-refs does not hold", gd, ref)
}

// TreeVersion returns the version in the [project] table of dir/pyproject.toml.
func TreeVersion(dir string) (string, error) {
	path := filepath.Join(dir, "pyproject.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading Hermes version: %w", err)
	}
	return projectVersion(path, b)
}

func projectVersion(path string, b []byte) (string, error) {
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			table = line
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if table != "[project]" || !ok || strings.TrimSpace(key) != "version" {
			continue
		}
		v := strings.TrimSpace(val)
		if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return "", fmt.Errorf("%s:%d: version is not a plain string", path, n)
		}
		return v[1 : len(v)-1], nil
	}
	return "", fmt.Errorf("%s: no version in the [project] table", path)
}
