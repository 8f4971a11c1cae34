//go:build !hbxrelease

// Package tartest writes tar archives for tests: each entry as given, a
// fixed modification time, PAX format, and gzip on request. It uses only
// the standard library, so any test of the agent may import it.
package tartest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"testing"
	"time"
)

// ModTime is the modification time of every entry.
var ModTime = time.Unix(1700000000, 0)

// Entry is one tar entry. A zero Type is a regular file; only a regular
// file carries its Body.
type Entry struct {
	Name     string
	Type     byte
	Body     string
	Link     string
	Mode     int64
	UID, GID int
}

// File is a regular file entry (mode 0644).
func File(name, body string) Entry {
	return Entry{Name: name, Type: tar.TypeReg, Body: body, Mode: 0o644}
}

// Dir is a directory entry (mode 0755).
func Dir(name string) Entry { return Entry{Name: name, Type: tar.TypeDir, Mode: 0o755} }

// Symlink is a symbolic link entry.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Link: target, Mode: 0o777}
}

// Hardlink is a hard link entry.
func Hardlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeLink, Link: target, Mode: 0o644}
}

// Special is an entry of the given type with no body (a device or a fifo).
func Special(name string, typ byte) Entry { return Entry{Name: name, Type: typ, Mode: 0o644} }

// Tar writes entries as an uncompressed tar.
func Tar(tb testing.TB, ents []Entry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.Name, Typeflag: typ, Linkname: e.Link, Mode: e.Mode, Uid: e.UID, Gid: e.GID,
			ModTime: ModTime, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.Body[:hdr.Size])); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Gzip compresses b.
func Gzip(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// TarGz is Tar, gzipped.
func TarGz(tb testing.TB, ents []Entry) []byte {
	tb.Helper()
	return Gzip(tb, Tar(tb, ents))
}
