package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/hermes-box/hermes-box/shared/bounded"
)

// ListArchive reads a gzip tar and returns its entry names, normalized and
// sorted: directories end in "/" ("." is "./"), names that are absolute or
// contain ".." are refused. The default Limits apply.
func ListArchive(ctx context.Context, r io.Reader) ([]string, error) {
	return listArchive(ctx, r, Limits{}.withDefaults())
}

// listArchive is ListArchive within lim's entry, name and unpacked limits.
func listArchive(ctx context.Context, r io.Reader, lim Limits) ([]string, error) {
	zr, err := gzip.NewReader(ctxReader{ctx, r})
	if err != nil {
		return nil, fmt.Errorf("reading gzip: %w", err)
	}
	names, err := listTar(zr, lim)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return nil, fmt.Errorf("reading gzip: %w", err)
	}
	return names, nil
}

// listTar lists the tar stream r as listArchive does, within lim; it
// reads r up to the end of the archive.
func listTar(r io.Reader, lim Limits) ([]string, error) {
	tr := tar.NewReader(bounded.Reader(r, lim.MaxUnpacked, "the unpacked archive"))
	ls := lister{budget: listBudget{lim: lim}}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading tar: %w", err)
		}
		if err := ls.add(hdr); err != nil {
			return nil, err
		}
	}
	return ls.sorted(), nil
}

// lister collects an archive's names within its budget; keep, when set,
// selects the names kept (every entry is still checked and counted).
type lister struct {
	budget  listBudget
	names   []string
	entries int64
	keep    func(name string) bool
}

func (l *lister) add(hdr *tar.Header) error {
	if err := l.budget.add(hdr.Name); err != nil {
		return err
	}
	name, err := normalize(hdr)
	if err != nil {
		return err
	}
	l.entries++
	if l.keep == nil || l.keep(name) {
		l.names = append(l.names, name)
	}
	return nil
}

func (l *lister) sorted() []string {
	slices.Sort(l.names)
	return l.names
}

// HeaderLister lists a tar stream from its headers alone, as ListTar
// lists the stream: the same names, checks and limits, the unpacked size
// counted as the bytes the stream takes (each entry's header blocks and
// its content padded to a block, then the trailer). It serves where the
// content is known by its size only (an incremental snapshot's tree).
type HeaderLister struct {
	ls       lister
	unpacked int64
	counter  countWriter
}

// HeaderLister returns a lister within l's entry, name and unpacked
// limits.
func (l Limits) HeaderLister() *HeaderLister {
	return &HeaderLister{ls: lister{budget: listBudget{lim: l.withDefaults()}}}
}

// Add lists one entry.
func (h *HeaderLister) Add(hdr *tar.Header) error {
	if err := h.ls.add(hdr); err != nil {
		return err
	}
	// The header's blocks as a tar writer writes them; the writer is
	// dropped before any content, so it writes nothing else.
	h.counter = 0
	if err := tar.NewWriter(&h.counter).WriteHeader(hdr); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalid, hdr.Name, err)
	}
	h.unpacked += int64(h.counter) + (hdr.Size+blockSize-1)/blockSize*blockSize
	if max := h.ls.budget.lim.MaxUnpacked; h.unpacked+2*blockSize > max { // and the stream's trailer
		return &bounded.LimitError{What: "the unpacked archive", Limit: max}
	}
	return nil
}

// Names returns the names listed (those Keep selects), normalized and
// sorted.
func (h *HeaderLister) Names() []string { return h.ls.sorted() }

// Keep keeps only the names keep selects, so that a tree of a million
// entries is checked without holding a million names.
func (h *HeaderLister) Keep(keep func(name string) bool) { h.ls.keep = keep }

// Entries is how many entries were listed, kept or not.
func (h *HeaderLister) Entries() int64 { return h.ls.entries }

// blockSize is a tar block's size.
const blockSize = 512

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// normalize checks an entry name and gives directories a trailing slash.
func normalize(hdr *tar.Header) (string, error) {
	name := hdr.Name
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsAny(name, "\x00\n") {
		return "", fmt.Errorf("%w: archive contains unsafe path %q", ErrInvalid, name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: archive contains unsafe path %q", ErrInvalid, name)
		}
	}
	if hdr.Typeflag == tar.TypeLink {
		if t := hdr.Linkname; strings.HasPrefix(t, "/") || slices.Contains(strings.Split(t, "/"), "..") {
			return "", fmt.Errorf("%w: archive contains unsafe hard link %q -> %q", ErrInvalid, name, t)
		}
	}
	if hdr.Typeflag == tar.TypeDir {
		clean := path.Clean(name)
		if clean == "." {
			return "./", nil
		}
		return strings.TrimSuffix(name, "/") + "/", nil
	}
	return name, nil
}

// ListingBytes renders a listing as rootfs-files.txt.
func ListingBytes(names []string) []byte {
	var b bytes.Buffer
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// CheckWorkspace applies the workspace content rules: Hermes' config, a
// work tree, and (unless legacy) Codex's config.
func CheckWorkspace(names []string, legacy bool) error {
	has := map[string]bool{}
	work := false
	for _, n := range names {
		n = strings.TrimPrefix(n, "./")
		has[n] = true
		work = work || isWork(n)
	}
	var missing []string
	if !has["hermes-home/config.yaml"] {
		missing = append(missing, "hermes-home/config.yaml")
	}
	if !work {
		missing = append(missing, "work/")
	}
	if !legacy && !has["codex-home/config.toml"] {
		missing = append(missing, "codex-home/config.toml")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s lacks %s", ErrInvalid, FileWorkspace, strings.Join(missing, ", "))
	}
	return nil
}

// isWork is whether a workspace name is the work directory or below it.
func isWork(n string) bool { return n == "work" || n == "work/" || strings.HasPrefix(n, "work/") }

// WorkspaceNames returns a Keep filter that keeps the names CheckWorkspace
// reads: the configuration files it requires and the first name of the
// work directory (one is all it needs), no other.
func WorkspaceNames() func(name string) bool {
	work := false
	return func(name string) bool {
		n := strings.TrimPrefix(name, "./")
		switch {
		case n == "hermes-home/config.yaml" || n == "codex-home/config.toml":
			return true
		case isWork(n) && !work:
			work = true
			return true
		}
		return false
	}
}

// ctxReader fails reads once ctx is done, so long copies can be cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
