package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// WriteApply writes the stdin of the agent's `snapshot apply` for the
// verified (staged) backup in dir: the destination's authorized key, then
// both archives, framed as protocol.ApplyMagic documents. The agent checks
// each part against the backup's SHA256SUMS.
func WriteApply(dir string, authorizedKey []byte, w io.Writer) error {
	return WriteApplyParts(dir, authorizedKey, Parts, w)
}

// WriteApplyParts is WriteApply of the archives parts alone, in Parts
// order: a workspace-only restore sends the workspace part without the
// root's, and the box keeps the root file system it was created with.
func WriteApplyParts(dir string, authorizedKey []byte, parts []Part, w io.Writer) error {
	sums, err := readSums(dir)
	if err != nil {
		return err
	}
	keySum := sha256.Sum256(authorizedKey)
	stream := []protocol.ApplyPart{{Name: protocol.ApplyPartKey, Size: int64(len(authorizedKey)),
		SHA256: hex.EncodeToString(keySum[:]), Body: bytes.NewReader(authorizedKey)}}
	for _, p := range parts {
		f, fi, err := openRegular(filepath.Join(dir, p.File))
		if err != nil {
			return err
		}
		defer f.Close()
		stream = append(stream, protocol.ApplyPart{Name: p.Name, Size: fi.Size(), SHA256: sums[p.File], Body: f})
	}
	if err := protocol.WriteApplyStream(w, stream); err != nil {
		return fmt.Errorf("streaming backup %s: %w", dir, err)
	}
	return nil
}
