package snaptree

import (
	"archive/tar"
	"fmt"

	"github.com/hermes-box/hermes-box/shared/cdc"
)

// The bounds of a tree's entries, which Entries checks on every tree (an
// honest encoder never writes past them; the encoder refuses to) so that
// decoding a tree costs a bounded amount per entry and per byte of
// content it claims. host/internal/chunkstore's stream table lists them.
const (
	// MinChunk is the smallest chunk of a file's content but its last
	// (the chunker's smallest cut): a file of size bytes names at most
	// size/MinChunk + 1 chunks, and none is empty.
	MinChunk = cdc.MinSize
	// MaxPAXRecords is the most PAX records of one entry (a file's
	// extended attributes: a handful on any real system).
	MaxPAXRecords = 256
	// MaxPAXBytes is the most bytes of one entry's PAX keys and values
	// together (Linux's largest attribute value is 64 KiB).
	MaxPAXBytes = 256 << 10
	// MaxRecord is the most bytes of one entry's record: its names, its
	// PAX records and its numbers (names are PATH_MAX, 4 KiB, each).
	MaxRecord = MaxPAXBytes + 64<<10
)

// checkPAX checks hdr's PAX records against MaxPAXRecords and
// MaxPAXBytes.
func checkPAX(hdr *tar.Header) error {
	if len(hdr.PAXRecords) > MaxPAXRecords {
		return fmt.Errorf("%d PAX records, over the limit of %d", len(hdr.PAXRecords), MaxPAXRecords)
	}
	n := 0
	for k, v := range hdr.PAXRecords {
		n += len(k) + len(v)
	}
	if n > MaxPAXBytes {
		return fmt.Errorf("PAX records of %d bytes, over the limit of %d", n, MaxPAXBytes)
	}
	return nil
}
