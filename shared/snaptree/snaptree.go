// Package snaptree turns a tar stream into chunks and a tree, and back.
// The tree is itself a tar stream, cut into chunks too: every entry keeps
// its header, and a regular file's body is replaced by the ids (SHA-256)
// of its content's chunks, 32 bytes each, with its real size in the PAX
// record SizeRecord. Unchanged files and unchanged stretches of the tree
// cut into the same chunks, so a store keeps each once.
//
// A tree comes from the guest, which is not trusted: Decode bounds every
// length, checks that a file's chunks add up to its size, and writes
// nothing it has not checked.
package snaptree

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"strconv"
)

// SizeRecord is the PAX record holding a regular file's size in a tree.
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

// writeFile writes a regular file's tree entry: its header, its size in
// SizeRecord, and its chunk ids as the body.
func writeFile(tw *tar.Writer, hdr *tar.Header, size int64, ids []byte) error {
	h := *hdr
	h.PAXRecords = map[string]string{SizeRecord: strconv.FormatInt(size, 10)}
	for k, v := range hdr.PAXRecords {
		if k != SizeRecord {
			h.PAXRecords[k] = v
		}
	}
	h.Size = int64(len(ids))
	h.Format = tar.FormatPAX
	if err := tw.WriteHeader(&h); err != nil {
		return fmt.Errorf("writing the tree: %s: %w", hdr.Name, err)
	}
	if _, err := tw.Write(ids); err != nil {
		return fmt.Errorf("writing the tree: %s: %w", hdr.Name, err)
	}
	return nil
}
