package protocol

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The stdin of the agent's `snapshot apply` verb is line-framed:
//
//	hermes-box-apply 1\n
//	part authorized-key SIZE SHA256\n  then SIZE bytes: one OpenSSH public key line
//	part rootfs SIZE SHA256\n          then SIZE bytes: rootfs.tar.gz of a backup
//	part workspace SIZE SHA256\n       then SIZE bytes: workspace.tar.gz of a backup
//	end\n
//
// The parts come in this order. SIZE is decimal, SHA256 lowercase hex. The
// agent hashes each part while it consumes it and marks the box
// restore-ready only when all of them matched. A workspace-only restore
// (`hermes-box restore --workspace-only`) leaves the rootfs part out: the
// box keeps the root file system of the image it was created from.
const ApplyMagic = "hermes-box-apply 1"

// ApplyPartKey is the first part of an apply stream, before the snapshot's
// parts (boxlayout.PartRootfs, then boxlayout.PartWorkspace).
const ApplyPartKey = "authorized-key"

// ApplyPart is one framed part.
type ApplyPart struct {
	Name   string
	Size   int64
	SHA256 string
	Body   io.Reader
}

// WriteApplyStream frames parts on w.
func WriteApplyStream(w io.Writer, parts []ApplyPart) error {
	if _, err := fmt.Fprintf(w, "%s\n", ApplyMagic); err != nil {
		return fmt.Errorf("writing apply stream: %w", err)
	}
	for _, p := range parts {
		if _, err := io.WriteString(w, p.Header()+"\n"); err != nil {
			return fmt.Errorf("writing apply stream: %w", err)
		}
		n, err := io.Copy(w, p.Body)
		if err != nil {
			return fmt.Errorf("sending %s: %w", p.Name, err)
		}
		if n != p.Size {
			return fmt.Errorf("sending %s: %d of %d bytes", p.Name, n, p.Size)
		}
	}
	if _, err := io.WriteString(w, "end\n"); err != nil {
		return fmt.Errorf("writing apply stream: %w", err)
	}
	return nil
}

// Header is the part's header line without its newline.
func (p ApplyPart) Header() string {
	return fmt.Sprintf("part %s %d %s", p.Name, p.Size, p.SHA256)
}

// ParseApplyHeader parses a part header line (without newline) that must
// name the part want.
func ParseApplyHeader(line, want string) (ApplyPart, error) {
	f := strings.Split(line, " ")
	if len(f) != 4 || f[0] != "part" || f[1] != want {
		return ApplyPart{}, fmt.Errorf("apply stream: want part %s, got %q", want, truncate([]byte(line)))
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 || f[2] != strconv.FormatInt(size, 10) {
		return ApplyPart{}, fmt.Errorf("apply stream: part %s: bad size %q", want, f[2])
	}
	if sum, err := hex.DecodeString(f[3]); err != nil || len(sum) != 32 || strings.ToLower(f[3]) != f[3] {
		return ApplyPart{}, fmt.Errorf("apply stream: part %s: bad sha256 %q", want, f[3])
	}
	return ApplyPart{Name: want, Size: size, SHA256: f[3]}, nil
}
