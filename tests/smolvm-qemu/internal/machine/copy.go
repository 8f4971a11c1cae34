package machine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/images/e2e/guestinit/wire"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// MaxCopy is smolvm's cap on `machine cp`.
const MaxCopy = 4 << 30

// CopyIn writes the host file src to guestPath in the machine (into it
// when guestPath is a directory), atomically on the guest side.
func (s *Store) CopyIn(ctx context.Context, name, src, guestPath string) error {
	if _, err := s.running(ctx, name, "cp"); err != nil {
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("io operation failed: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("io operation failed: %s: not a regular file", src)
	}
	if fi.Size() > MaxCopy {
		return agentError("cp", fmt.Errorf("%s is larger than the 4 GiB limit", src))
	}
	c, err := dialCtl(ctx, s.DataDir(name), time.Minute)
	if err != nil {
		return agentError("cp", err)
	}
	defer c.Close()
	req := wire.PutRequest{Path: guestPath, Name: filepath.Base(src), Mode: uint32(fi.Mode().Perm()), Size: fi.Size()}
	if err := c.sendJSON(wire.Put, req); err != nil {
		return agentError("cp", err)
	}
	go func() { _ = sendData(c, f) }()
	if _, err := c.expect(wire.OK); err != nil {
		return agentError("cp", err)
	}
	return nil
}

func sendData(c *ctlConn, r io.Reader) error {
	buf := make([]byte, wire.Chunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if err := c.send(wire.Data, buf[:n]); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return c.send(wire.End, nil)
		}
		if err != nil {
			return err
		}
	}
}

// CopyOut writes the guest file guestPath to dst on the host (into it when
// dst is a directory), atomically.
func (s *Store) CopyOut(ctx context.Context, name, guestPath, dst string) error {
	if _, err := s.running(ctx, name, "cp"); err != nil {
		return err
	}
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, filepath.Base(guestPath))
	}
	c, err := dialCtl(ctx, s.DataDir(name), time.Minute)
	if err != nil {
		return agentError("cp", err)
	}
	defer c.Close()
	if err := c.sendJSON(wire.Get, wire.GetRequest{Path: guestPath}); err != nil {
		return agentError("cp", err)
	}
	f, err := c.expect(wire.FileInfo)
	if err != nil {
		return agentError("cp", err)
	}
	var meta wire.FileMeta
	if err := json.Unmarshal(f.Payload, &meta); err != nil {
		return agentError("cp", err)
	}
	err = atomicfile.WriteFrom(dst, func(w io.Writer) error { return c.receive(w, meta.Size) }, os.FileMode(meta.Mode)&os.ModePerm)
	if err != nil {
		return agentError("cp", err)
	}
	return nil
}

// receive copies Data frames to w until End, checking the size.
func (c *ctlConn) receive(w io.Writer, size int64) error {
	var n int64
	for {
		f, err := c.recv()
		if err != nil {
			return err
		}
		switch f.Type {
		case wire.Data:
			n += int64(len(f.Payload))
			if _, err := w.Write(f.Payload); err != nil {
				return err
			}
		case wire.End:
			if n != size {
				return fmt.Errorf("got %d of %d bytes", n, size)
			}
			return nil
		}
	}
}
