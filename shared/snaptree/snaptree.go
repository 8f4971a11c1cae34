// Package snaptree turns a tar stream into chunks and a tree, and back.
// The tree is a stream of records (compact.go), cut into chunks too: each
// entry's header, and for a regular file the ids (SHA-256) of its
// content's chunks, 32 bytes each. Unchanged files and unchanged
// stretches of the tree cut into the same chunks, so a store keeps each
// once.
//
// A tree comes from the guest, which is not trusted: Decode bounds every
// length, checks that a file's chunks add up to its size, and writes
// nothing it has not checked.
package snaptree

import "crypto/sha256"

// SizeRecord is the PAX record holding a regular file's size in a tree
// of the tar format (written before the compact format), where the body of a file's
// entry is its chunk ids.
const SizeRecord = "HERMESBOX.size"

// ID is a chunk's SHA-256.
type ID = [sha256.Size]byte

// Sink receives each chunk of an encoding: a file's content or the tree.
// data is valid only during the call.
type Sink func(id ID, data []byte) error

// Stats count what Encode read.
type Stats struct {
	Entries int64
	// Bytes is the content of regular files.
	Bytes int64
	// Read is the part of Bytes that was read and cut into chunks (the
	// rest was known, Encoder.WriteKnown).
	Read int64
}
