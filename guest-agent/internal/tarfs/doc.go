// Package tarfs is the agent's one tar reader and writer. Every write goes
// through directory file descriptors opened one component at a time with
// O_NOFOLLOW below a held root (the model of os.Root), so no entry can land
// outside the destination, whatever symlinks the archive or the disk hold.
// Names are cleaned by one rule (CleanParts: absolute names and ".." are
// refused, never rewritten).
//
// Extract unpacks one tar stream (boot's workspace seed, provision's
// downloads, snapshot restore); Unpack applies the layers of an OCI image
// (whiteouts, opaque directories, hard links) after the layer pre-check
// (Checker) has accepted each entry; Write archives a directory tree.
//
// The unpack is built for many small entries: files are created with
// O_EXCL|O_NOFOLLOW relative to the held parent (an existing name is removed
// only when creation reports it), mode and times are set on the open file,
// extended attributes are touched only when an entry carries them, and
// directory metadata is applied in one pass at the end.
package tarfs
