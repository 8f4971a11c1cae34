// Package patch adds Hermes Box's "gated" approval mode to an installed
// Hermes Agent tree, and only to a tree whose exact text it knows.
//
// The edits are anchors: pure []byte → []byte functions that each require
// their anchor text to occur exactly once in one file and insert a hunk
// (embedded from hunks/*.pyfrag) at a fixed point inside or beside it. The
// anchors are grouped into sets keyed by shared/pins' HermesRelease.AnchorSet
// ("hermes-0.16.0", "hermes-0.17.0", "hermes-0.19.0"). Every set also has
// the input edits (inputs.go): a .env load leaves the variables that decide
// policy or code loading as the process started with them, the managed
// directory is the one recorded in the tree (ManagedPointer), and no plugin
// or memory provider loads from HERMES_HOME or the working directory.
//
// Which commit a tree holds is read from its .git/HEAD (a detached commit, or
// a ref resolved through the loose ref or packed-refs). Because the installed
// tree may have its .git removed to save space, the install step records the
// commit in SourceMarker (".hermes-box-source", "commit=<sha>\n") with
// WriteSourceMarker; when both exist they must agree. The version line of
// pyproject.toml's [project] table must match the pin as well. Anything else
// is refused before a single byte is written.
//
// Patching plans every output in memory first, then writes each file
// atomically (reviewer module first, then the patched files), byte-compiles
// them, runs the reviewer's regression suite against the patched tree, and
// writes the marker (MarkerFile) last. A file is either wholly original or
// wholly patched, so an interrupted run leaves an unmarked tree that the next
// run completes. A re-run on a marked tree verifies the marker, the module's
// bytes and every hunk marker (exactly once) and writes nothing.
//
// The reviewer module itself, gated_approval.py, is Python: it is embedded
// here and installed as tools/gated_approval.py. Its unittest suite,
// test_gated_approval.py, runs in `make test` and against every tree patched.
package patch
