//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/images/e2e/guestinit/wire"
)

// put writes a file from Data frames: temp file in the target's directory,
// fsync, rename. Nothing changes unless all of it arrived.
func (p *port) put(s *session, payload []byte) {
	var req wire.PutRequest
	if err := json.Unmarshal(payload, &req); err != nil || !filepath.IsAbs(req.Path) {
		p.fail(s, fmt.Errorf("bad put request for %q", req.Path))
		return
	}
	dst := req.Path
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, filepath.Base(req.Name))
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".smolvm-cp-*")
	if err != nil {
		p.fail(s, fmt.Errorf("copy to %s: %w", dst, err))
		return
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := receive(s, tmp, req.Size); err != nil {
		p.fail(s, fmt.Errorf("copy to %s: %w", dst, err))
		return
	}
	err = errors.Join(tmp.Chmod(os.FileMode(req.Mode)&os.ModePerm), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		p.fail(s, fmt.Errorf("copy to %s: %w", dst, err))
		return
	}
	p.send(s, wire.OK, nil)
}

// receive copies Data frames into w until End; the total must equal size.
func receive(s *session, w io.Writer, size int64) error {
	var n int64
	for {
		select {
		case f := <-s.in:
			switch f.Type {
			case wire.Data:
				n += int64(len(f.Payload))
				if n > size {
					return fmt.Errorf("more than the announced %d bytes", size)
				}
				if _, err := w.Write(f.Payload); err != nil {
					return err
				}
			case wire.End:
				if n != size {
					return fmt.Errorf("got %d of %d bytes", n, size)
				}
				return nil
			}
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

// get streams a regular file to the host.
func (p *port) get(s *session, payload []byte) {
	var req wire.GetRequest
	if err := json.Unmarshal(payload, &req); err != nil || !filepath.IsAbs(req.Path) {
		p.fail(s, fmt.Errorf("bad get request for %q", req.Path))
		return
	}
	f, err := os.Open(req.Path)
	if err != nil {
		p.fail(s, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		p.fail(s, fmt.Errorf("%s: not a regular file", req.Path))
		return
	}
	p.sendJSON(s, wire.FileInfo, wire.FileMeta{Mode: uint32(fi.Mode().Perm()), Size: fi.Size()})
	buf := make([]byte, wire.Chunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			p.send(s, wire.Data, buf[:n])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			p.fail(s, err)
			return
		}
	}
	p.send(s, wire.End, nil)
}
