package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/shared/bounded"
)

// TestHeaderListerAgreesWithListTar: from the headers alone, the lister
// gives ListTar's names, counts the bytes the tar stream takes, and
// refuses what ListTar refuses: one byte less room than the stream
// takes is refused by both.
func TestHeaderListerAgreesWithListTar(t *testing.T) {
	hdrs := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "./a", Mode: 0o644, Size: 1},
		{Typeflag: tar.TypeReg, Name: "./" + strings.Repeat("long/", 40) + "b", Mode: 0o644, Size: 513},
		{Typeflag: tar.TypeReg, Name: "./x", Mode: 0o644, Size: 4096, PAXRecords: map[string]string{"SCHILY.xattr.user.k": "v"}},
		{Typeflag: tar.TypeSymlink, Name: "./l", Linkname: strings.Repeat("t", 200)},
		{Typeflag: tar.TypeLink, Name: "./h", Linkname: "./a"},
		{Typeflag: tar.TypeReg, Name: "./empty", Mode: 0o600},
	}
	var stream bytes.Buffer
	tw := tar.NewWriter(&stream)
	for _, h := range hdrs {
		must(t, tw.WriteHeader(h))
		_, err := tw.Write(make([]byte, h.Size))
		must(t, err)
	}
	must(t, tw.Close())
	size := int64(stream.Len())

	lim := Limits{MaxUnpacked: size}
	want, err := lim.ListTar(context.Background(), bytes.NewReader(stream.Bytes()))
	must(t, err)
	if _, err := (Limits{MaxUnpacked: size - 1}).ListTar(context.Background(), bytes.NewReader(stream.Bytes())); err == nil {
		t.Fatal("ListTar took a stream one byte over its limit")
	}
	ls := lim.HeaderLister()
	for _, h := range hdrs {
		must(t, ls.Add(h))
	}
	if got := ls.Names(); !slices.Equal(got, want) {
		t.Fatalf("names %q, ListTar's %q", got, want)
	}
	if ls.unpacked+2*blockSize != size {
		t.Fatalf("counted %d bytes and the trailer, the stream takes %d", ls.unpacked, size)
	}

	tests := []struct {
		name string
		lim  Limits
		add  *tar.Header
		want string
	}{
		{"one byte past the unpacked limit", Limits{MaxUnpacked: size - 1}, nil, "unpacked archive exceeds"},
		{"too many entries", Limits{MaxEntries: len(hdrs) - 1}, nil, "number of entries exceeds"},
		{"an unsafe name", Limits{}, &tar.Header{Typeflag: tar.TypeReg, Name: "../escape"}, "unsafe path"},
		{"an unsafe hard link", Limits{}, &tar.Header{Typeflag: tar.TypeLink, Name: "./h2", Linkname: "/etc/shadow"}, "unsafe hard link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := tt.lim.HeaderLister()
			var err error
			for _, h := range append(slices.Clone(hdrs), tt.add) {
				if h == nil {
					continue
				}
				if err = ls.Add(h); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
			var le *bounded.LimitError
			if strings.Contains(tt.want, "exceeds") && !errors.As(err, &le) {
				t.Fatalf("err = %v, want a limit error", err)
			}
		})
	}
}
