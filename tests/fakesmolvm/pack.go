package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

// markerName is the file 1.0.4 writes when a pack's layers are extracted.
const markerName = ".smolvm-extracted"

// defaultPackCacheMax is 1.0.4's extraction-cache cap without
// SMOLVM_PACK_CACHE_MAX_BYTES.
const defaultPackCacheMax = 5 << 30

// smolfileKeys are the top-level keys a 1.0.4 Smolfile may use (the
// section names included); anything else is refused (deny_unknown_fields).
var smolfileKeys = map[string]bool{
	"image": true, "entrypoint": true, "cmd": true, "env": true, "secrets": true, "workdir": true,
	"cpus": true, "memory": true, "net": true, "gpu": true, "gpu_vram": true, "storage": true,
	"overlay": true, "ports": true, "volumes": true, "init": true, "[network]": true, "[dev]": true,
	"[artifact]": true, "[pack]": true, "[health]": true, "[restart]": true, "[auth]": true,
	"[service]": true, "[secrets]": true,
}

// pack is `pack create --from-vm VM --output PATH [--smolfile FILE]`: it
// writes PATH (the stub) and PATH.smolmachine (here a tar.gz of the root).
func (f *fake) pack(in *smolvmcli.Invocation) error {
	vm := in.Value("from-vm")
	if vm == "" {
		return errors.New("the fake smolvm packs only --from-vm machines")
	}
	r, err := f.load(vm)
	if err != nil {
		return err
	}
	if r.State == stateRunning || r.State == stateUnreachable {
		return fmt.Errorf("machine '%s' must be stopped before packing", vm)
	}
	var m packManifest
	if sf := in.Value("smolfile"); sf != "" {
		if m, err = readSmolfile(sf); err != nil {
			return err
		}
	}
	out := in.Value("output")
	if err := os.WriteFile(out, []byte("#!/bin/sh\necho packed smolvm stub\n"), 0o755); err != nil {
		return err
	}
	if err := writeArchive(f.root(vm), out+".smolmachine", m); err != nil {
		return err
	}
	fmt.Printf("Packed %s into %s.smolmachine\n", vm, out)
	return nil
}

// packManifest is what the artifact keeps of the Smolfile: what a machine
// created from it runs when it starts.
type packManifest struct {
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// manifestName is the artifact's first entry; it is not extracted.
const manifestName = ".smolmachine-manifest.json"

// readSmolfile checks the Smolfile and reads its top-level entrypoint and
// cmd (string arrays).
func readSmolfile(path string) (packManifest, error) {
	var m packManifest
	if err := checkSmolfile(path); err != nil {
		return m, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("reading Smolfile: %w", err)
	}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			break // top level only
		}
		key, val, ok := strings.Cut(line, "=")
		var dst *[]string
		switch strings.TrimSpace(key) {
		case "entrypoint":
			dst = &m.Entrypoint
		case "cmd":
			dst = &m.Cmd
		}
		if !ok || dst == nil {
			continue
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(val)), dst); err != nil {
			return m, fmt.Errorf("parsing Smolfile %s line %d: %s: want an array of strings", path, n+1, strings.TrimSpace(key))
		}
	}
	return m, nil
}

// checkSmolfile refuses unknown top-level keys and sections.
func checkSmolfile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading Smolfile: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	section := ""
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			if !smolfileKeys[line] {
				return fmt.Errorf("parsing Smolfile %s line %d: unknown section %s", path, n, line)
			}
			continue
		}
		key, _, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("parsing Smolfile %s line %d: expected key = value", path, n)
		}
		if section == "" && !smolfileKeys[strings.TrimSpace(key)] {
			return fmt.Errorf("parsing Smolfile %s line %d: unknown field `%s`", path, n, strings.TrimSpace(key))
		}
	}
	return sc.Err()
}

func writeArchive(root, path string, m packManifest) error {
	mb, err := json.Marshal(m)
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	tw := tar.NewWriter(zw)
	err = tw.WriteHeader(&tar.Header{Name: manifestName, Mode: 0o644, Size: int64(len(mb)), Typeflag: tar.TypeReg})
	if err == nil {
		_, err = tw.Write(mb)
	}
	if err == nil {
		err = addTree(tw, root, !broken(brokenPackDropsXattrs))
	}
	for _, c := range []io.Closer{tw, zw, out} {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("writing pack: %w", err)
	}
	return os.Chmod(path, 0o644)
}

// addTree archives root's directories, regular files and symlinks as
// tar.Writer.AddFS does, each with its extended attributes as PAX records
// (SCHILY.xattr.NAME) when withXattrs.
func addTree(tw *tar.Writer, root string, withXattrs bool) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		name, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch typ := d.Type(); {
		case typ == fs.ModeSymlink:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case !typ.IsRegular() && !typ.IsDir():
			return errors.New("tar: cannot add non-regular file")
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(name)
		if d.IsDir() {
			h.Name += "/"
		}
		if withXattrs && link == "" {
			if h.PAXRecords, err = xattrRecords(p); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(h); err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
}

// extract is `create --from`: the artifact's tree becomes the machine's
// root and the marker is written, unless the simulated cache eviction of
// 1.0.4 removes the just-extracted layers again.
func (f *fake) extract(name, artifact string) (entrypoint, cmd []string, err error) {
	m, err := readArchive(artifact, f.root(name))
	if err != nil {
		return nil, nil, fmt.Errorf("extracting %s: %w", artifact, err)
	}
	pack := filepath.Join(f.data(name), "pack")
	if err := os.MkdirAll(pack, 0o755); err != nil {
		return nil, nil, err
	}
	if sharedStore() {
		return m.Entrypoint, m.Cmd, f.extractShared(name, artifact)
	}
	if err := os.MkdirAll(filepath.Join(pack, "layers", "0"), 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(pack, markerName), nil, 0o644); err != nil {
		return nil, nil, err
	}
	info, err := os.Stat(artifact)
	if err != nil {
		return nil, nil, err
	}
	size := info.Size()
	if s, err := strconv.ParseInt(os.Getenv("FAKESMOLVM_PACK_SIZE"), 10, 64); err == nil {
		size = s
	}
	limit := int64(defaultPackCacheMax)
	if l, err := strconv.ParseInt(os.Getenv("SMOLVM_PACK_CACHE_MAX_BYTES"), 10, 64); err == nil {
		limit = l
	}
	if size > limit {
		return m.Entrypoint, m.Cmd, os.RemoveAll(pack) // evict_cache_to_size deletes pack/ itself
	}
	return m.Entrypoint, m.Cmd, nil
}

// extractShared is 1.9.x's shared store on Linux: the layers go to
// <state>/vms/_shared/<crc32 of the artifact>/ and the machine's data dir
// gets the .pack-shared pointer; the store is never size-evicted.
func (f *fake) extractShared(name, artifact string) error {
	b, err := os.ReadFile(artifact)
	if err != nil {
		return err
	}
	shared := filepath.Join(f.state, "vms", "_shared", fmt.Sprintf("%08x", crc32.ChecksumIEEE(b)))
	if err := os.MkdirAll(filepath.Join(shared, "layers", "0"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(shared, markerName), nil, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(f.data(name), ".pack-shared"), []byte(shared+"\n"), 0o600)
}

// layers is where a machine created --from has its extracted layers: the
// shared directory its pointer names, else data/pack.
func (f *fake) layers(name string) string {
	if b, err := os.ReadFile(filepath.Join(f.data(name), ".pack-shared")); err == nil {
		return strings.TrimSpace(string(b))
	}
	return filepath.Join(f.data(name), "pack")
}

// readArchive extracts the artifact's tree into root and returns its
// manifest.
func readArchive(path, root string) (packManifest, error) {
	var m packManifest
	in, err := os.Open(path)
	if err != nil {
		return m, err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return m, fmt.Errorf("not a smolmachine: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return m, err
		}
		if !filepath.IsLocal(h.Name) {
			return m, fmt.Errorf("unsafe path %q in pack", h.Name)
		}
		if h.Name == manifestName {
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				return m, fmt.Errorf("reading the manifest: %w", err)
			}
			continue
		}
		dst := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, fs.FileMode(h.Mode).Perm()|0o700)
		case tar.TypeReg:
			err = writeEntry(dst, tr, fs.FileMode(h.Mode).Perm())
		}
		if err == nil && (h.Typeflag == tar.TypeDir || h.Typeflag == tar.TypeReg) {
			err = setXattrRecords(dst, h.PAXRecords)
		}
		if err != nil {
			return m, err
		}
	}
}

func writeEntry(dst string, r io.Reader, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

// copyTree copies the regular files and directories of src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		return writeEntry(target, in, info.Mode().Perm())
	})
}
