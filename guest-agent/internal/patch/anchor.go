package patch

import (
	"bytes"
	"fmt"
)

// Anchor is one edit: the text Before+After must occur exactly once in File,
// and the hunk is inserted between Before and After.
type Anchor struct {
	File  string // slash-separated path inside the Hermes tree
	Label string
	// Before and After together are the anchor text; either may be empty.
	Before, After string
	// Hunk is the text inserted; Marker is a string only the hunk contains,
	// which proves the anchor has been applied.
	Hunk, Marker string
}

// Text is the exact text the anchor matches.
func (a Anchor) Text() string { return a.Before + a.After }

// AnchorError reports an anchor that does not occur exactly once.
type AnchorError struct {
	File, Label string
	// What is "anchor" or "marker".
	What  string
	Count int
}

func (e *AnchorError) Error() string {
	return fmt.Sprintf("%s: %s %q occurs %d times, want exactly 1 (upstream drift: this tree is not the one the anchor set was written for)",
		e.File, e.What, e.Label, e.Count)
}

// PatchedText is the anchor with its hunk applied.
func (a Anchor) PatchedText() string { return a.Before + a.Hunk + a.After }

// Count returns how often the anchor text occurs in src.
func (a Anchor) Count(src []byte) int { return bytes.Count(src, []byte(a.Text())) }

// Applied returns how often the anchor's marker occurs in src.
func (a Anchor) Applied(src []byte) int { return bytes.Count(src, []byte(a.Marker)) }

// Apply returns src with the hunk inserted. It never modifies src, and it
// fails with an *AnchorError unless the anchor occurs exactly once.
func (a Anchor) Apply(src []byte) ([]byte, error) {
	anchor := []byte(a.Text())
	if n := bytes.Count(src, anchor); n != 1 || len(anchor) == 0 {
		return nil, &AnchorError{File: a.File, Label: a.Label, What: "anchor", Count: n}
	}
	i := bytes.Index(src, anchor) + len(a.Before)
	out := make([]byte, 0, len(src)+len(a.Hunk))
	out = append(out, src[:i]...)
	out = append(out, a.Hunk...)
	return append(out, src[i:]...), nil
}
