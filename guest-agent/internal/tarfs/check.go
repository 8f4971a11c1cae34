package tarfs

// The pre-check of OCI layer tar entries refuses (never contains or
// rewrites) absolute paths, ".." components, entries through a symlink,
// hardlinks outside the root, device nodes, fifos and whiteouts that point
// outside, modelling the merged tree across layers so symlinks and whiteouts
// of earlier entries and layers count. A hard link to a symlink is that
// symlink (linkat does not follow it), so entries through it are refused.

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Rule names one reason the pre-check refuses a layer entry.
type Rule string

// The rules of the pre-check. Each refuses the whole image: an unsafe entry
// is never contained, skipped or rewritten.
const (
	RuleAbsolute       Rule = "absolute path"
	RuleDotDot         Rule = `".." component`
	RuleThroughSymlink Rule = "path through a symlink"
	RuleHardlinkEscape Rule = "hardlink outside the root"
	RuleHardlinkTarget Rule = "hardlink to a missing entry"
	RuleDevice         Rule = "device node"
	RuleFifo           Rule = "fifo"
	RuleWhiteout       Rule = "whiteout pointing outside"
	RuleType           Rule = "unsupported entry type"
	RuleName           Rule = "empty name"
	RuleSelectedDir    Rule = "selected directory that is not a directory"
)

// RefusedError says which entry of which layer broke which rule.
type RefusedError struct {
	Layer int // 1-based
	Entry string
	Rule  Rule
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("layer %d entry %q refused: %s", e.Layer, e.Entry, e.Rule)
}

// whiteoutPrefix marks an OCI whiteout; opaqueName clears its directory.
const (
	whiteoutPrefix = ".wh."
	opaqueName     = ".wh..wh..opq"
)

// kind is what the pre-check knows about a path of the image so far.
type kind uint8

const (
	kindDir kind = iota + 1
	kindFile
	kindSymlink
)

// known is one path of the merged image and the layer that last wrote it.
type known struct {
	kind  kind
	layer int
}

// Entry is a checked layer entry with its path split into clean parts.
type Entry struct {
	// Parts is the cleaned path; empty for the root directory.
	Parts []string
	// Whiteout is set for whiteouts: Target is what they remove, or the
	// directory they make opaque.
	Whiteout bool
	Opaque   bool
	Target   []string
	// LinkParts is the cleaned hardlink target.
	LinkParts []string
	// LinkToSymlink is set for a hardlink whose target is a symlink.
	LinkToSymlink bool
}

// Path is the entry's cleaned slash-separated path.
func (e Entry) Path() string { return strings.Join(e.Parts, "/") }

// Checker refuses unsafe entries across the layers of one image. It models
// the merged tree (which paths are directories, files and symlinks after
// each entry, whiteouts applied) so that "through a symlink" covers
// symlinks made by earlier entries and earlier layers.
type Checker struct {
	layer int
	paths map[string]known
}

// NewChecker returns a checker positioned before the first layer.
func NewChecker() *Checker { return &Checker{paths: map[string]known{}} }

// NextLayer starts the next layer.
func (c *Checker) NextLayer() { c.layer++ }

// Check refuses hdr or records it in the model and returns its clean form.
func (c *Checker) Check(hdr *tar.Header) (Entry, error) {
	if c.layer == 0 {
		c.layer = 1
	}
	refuse := func(r Rule) (Entry, error) {
		return Entry{}, &RefusedError{Layer: c.layer, Entry: hdr.Name, Rule: r}
	}
	parts, rule := CleanParts(hdr.Name)
	if rule != "" {
		return refuse(rule)
	}
	if r := c.throughSymlink(parts); r != "" {
		return refuse(r)
	}
	e := Entry{Parts: parts}
	if len(parts) > 0 && strings.HasPrefix(parts[len(parts)-1], whiteoutPrefix) {
		return c.checkWhiteout(hdr, e)
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink: // the reader reports old TypeRegA entries as TypeReg
	case tar.TypeLink:
		link, rule := CleanParts(hdr.Linkname)
		if rule != "" || len(link) == 0 {
			return refuse(RuleHardlinkEscape)
		}
		if r := c.throughSymlink(link); r != "" {
			return refuse(r)
		}
		k, ok := c.paths[strings.Join(link, "/")]
		if !ok || k.kind == kindDir {
			return refuse(RuleHardlinkTarget)
		}
		e.LinkParts = link
		if k.kind == kindSymlink {
			// linkat links the symlink itself: the new name is a symlink.
			e.LinkToSymlink = true
			c.record(e.Path(), tar.TypeSymlink)
			return e, nil
		}
	case tar.TypeChar, tar.TypeBlock:
		return refuse(RuleDevice)
	case tar.TypeFifo:
		return refuse(RuleFifo)
	default:
		return refuse(RuleType)
	}
	if len(parts) == 0 && hdr.Typeflag != tar.TypeDir {
		return refuse(RuleType)
	}
	c.record(e.Path(), hdr.Typeflag)
	return e, nil
}

// checkWhiteout refuses whiteouts that name nothing, a parent or a nested
// path, and forgets what they remove from lower layers.
func (c *Checker) checkWhiteout(hdr *tar.Header, e Entry) (Entry, error) {
	name := e.Parts[len(e.Parts)-1]
	dir := e.Parts[:len(e.Parts)-1]
	e.Whiteout = true
	if name == opaqueName {
		e.Opaque = true
		e.Target = dir
		if k, ok := c.paths[strings.Join(dir, "/")]; ok && k.kind != kindDir {
			return Entry{}, &RefusedError{Layer: c.layer, Entry: hdr.Name, Rule: RuleWhiteout}
		}
		c.forgetLower(strings.Join(dir, "/"), false)
		return e, nil
	}
	target := strings.TrimPrefix(name, whiteoutPrefix)
	if target == "" || target == "." || target == ".." || strings.HasPrefix(target, whiteoutPrefix) {
		return Entry{}, &RefusedError{Layer: c.layer, Entry: hdr.Name, Rule: RuleWhiteout}
	}
	e.Target = append(append([]string{}, dir...), target)
	c.forgetLower(strings.Join(e.Target, "/"), true)
	return e, nil
}

// throughSymlink reports whether any proper ancestor of parts is a symlink.
func (c *Checker) throughSymlink(parts []string) Rule {
	p := ""
	for i := 0; i < len(parts)-1; i++ {
		if i > 0 {
			p += "/"
		}
		p += parts[i]
		if k, ok := c.paths[p]; ok && k.kind == kindSymlink {
			return RuleThroughSymlink
		}
	}
	return ""
}

// record notes what an accepted entry leaves at path. A non-directory that
// replaces a directory removes the directory's whole subtree.
func (c *Checker) record(path string, typ byte) {
	k := kindFile
	switch typ {
	case tar.TypeDir:
		k = kindDir
	case tar.TypeSymlink:
		k = kindSymlink
	}
	if old, ok := c.paths[path]; ok && old.kind == kindDir && k != kindDir {
		c.forgetSubtree(path, 1<<30)
	}
	if path != "" {
		c.paths[path] = known{kind: k, layer: c.layer}
	}
}

// forgetLower removes what earlier layers put at path's subtree (and at
// path itself when self is set). Entries of the current layer stay, as the
// unpacker keeps them too: the model may only ever be stricter than disk.
func (c *Checker) forgetLower(path string, self bool) {
	if self {
		if k, ok := c.paths[path]; ok && k.layer < c.layer {
			delete(c.paths, path)
		}
	}
	c.forgetSubtree(path, c.layer)
}

// forgetSubtree removes descendants of path written before layer.
func (c *Checker) forgetSubtree(path string, layer int) {
	prefix := path + "/"
	if path == "" {
		prefix = ""
	}
	for p, k := range c.paths {
		if k.layer < layer && strings.HasPrefix(p, prefix) && p != path {
			delete(c.paths, p)
		}
	}
}

// CleanParts splits a tar name into path components, dropping empty and "."
// components; absolute names and ".." components are refused, never
// rewritten.
func CleanParts(name string) ([]string, Rule) {
	if name == "" {
		return nil, RuleName
	}
	if strings.HasPrefix(name, "/") {
		return nil, RuleAbsolute
	}
	if strings.ContainsRune(name, 0) {
		return nil, RuleName
	}
	var parts []string
	for p := range strings.SplitSeq(name, "/") {
		switch p {
		case "", ".":
		case "..":
			return nil, RuleDotDot
		default:
			parts = append(parts, p)
		}
	}
	return parts, ""
}

// CheckLayer runs the pre-check over one uncompressed layer tar and
// returns the first refusal or read error.
func CheckLayer(r io.Reader) error {
	c := NewChecker()
	c.NextLayer()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading layer: %w", err)
		}
		if _, err := c.Check(hdr); err != nil {
			return err
		}
	}
}
