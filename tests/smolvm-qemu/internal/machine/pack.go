package machine

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/smolfile"
)

// A .smolmachine of the stand-in is a tar of manifest.json, the kernel and
// the machine's disk flattened into one qcow2 (no backing file), so it
// stands alone like smolvm's. It is not smolvm's format.
const (
	packManifest = "manifest.json"
	packKernel   = "vmlinuz"
	packDisk     = "disk.qcow2"
	packFormat   = "smolvm-qemu-pack/1"
	// extractedMarker is the file smolvm 1.0.4 leaves in <data-dir>/pack.
	extractedMarker = ".smolvm-extracted"
)

// Manifest describes a pack.
type Manifest struct {
	Format        string   `json:"format"`
	SmolvmVersion string   `json:"smolvm_version"`
	Created       int64    `json:"created"`
	FromVM        string   `json:"from_vm"`
	Entrypoint    []string `json:"entrypoint"`
	Cmd           []string `json:"cmd"`
	Env           []string `json:"env"`
	Workdir       string   `json:"workdir,omitempty"`
	CPUs          int      `json:"cpus,omitempty"`
	Memory        int      `json:"memory,omitempty"`
}

// PackCreate writes output (a copy of the stand-in, as smolvm writes its own
// binary as the stub) and output.smolmachine from a stopped machine's disk
// and the Smolfile's entrypoint, cmd, env, workdir, cpus and memory.
func (s *Store) PackCreate(ctx context.Context, vm, smolfilePath, output, version string) error {
	r, err := s.Load(vm)
	if err != nil {
		return err
	}
	if st := s.State(ctx, r); st == Running || st == Unreachable {
		return invalidState("stopped", st)
	}
	data, err := os.ReadFile(smolfilePath)
	if err != nil {
		return configError("read smolfile", err.Error())
	}
	sf, err := smolfile.Parse(smolfilePath, data)
	if err != nil {
		return configError("parse smolfile", err.Error())
	}
	tmp, err := os.MkdirTemp(filepath.Dir(output), ".smolvm-pack-*")
	if err != nil {
		return storageError("pack", err)
	}
	defer os.RemoveAll(tmp)
	dir := s.DataDir(vm)
	flat := filepath.Join(tmp, packDisk)
	if err := qemuImg(ctx, "convert", "-O", "qcow2", filepath.Join(dir, diskFile), flat); err != nil {
		return storageError("flatten disk", err)
	}
	owner, err := PackOwner()
	if err != nil {
		return err
	}
	if err := remapDisk(ctx, tmp, filepath.Join(dir, kernelFile), flat, owner); err != nil {
		return agentError("pack from VM", err)
	}
	m := Manifest{
		Format: packFormat, SmolvmVersion: version, Created: time.Now().Unix(), FromVM: vm,
		Entrypoint: nonNil(sf.Entrypoint), Cmd: nonNil(sf.Cmd), Env: nonNil(sf.Env), Workdir: sf.Workdir,
		CPUs: sf.CPUs, Memory: sf.Memory,
	}
	files := []string{filepath.Join(dir, kernelFile), flat}
	if err := atomicfile.WriteFrom(output+".smolmachine", func(w io.Writer) error { return writePack(w, m, files) }, 0o644); err != nil {
		return storageError("write "+output+".smolmachine", err)
	}
	self, err := os.Executable()
	if err == nil {
		err = atomicfile.WriteFrom(output, func(w io.Writer) error { return copyInto(w, self) }, 0o755)
	}
	if err != nil {
		return storageError("write "+output, err)
	}
	return nil
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func copyInto(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// writePack writes the tar: manifest, kernel, disk.
func writePack(w io.Writer, m Manifest, files []string) error {
	tw := tar.NewWriter(w)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: packManifest, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	names := []string{packKernel, packDisk}
	for i, path := range files {
		if err := addFile(tw, names[i], path); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// extractPack unpacks a .smolmachine into dest and leaves smolvm's
// extraction marker there last, so the marker means "complete".
func extractPack(artifact, dest string) (*Manifest, error) {
	f, err := os.Open(artifact)
	if err != nil {
		return nil, configError("create machine", fmt.Sprintf("file not found: %s", artifact))
	}
	defer f.Close()
	if err := os.MkdirAll(dest, 0o700); err != nil {
		return nil, storageError("extract pack", err)
	}
	var m *Manifest
	want := map[string]bool{packManifest: true, packKernel: true, packDisk: true}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, agentError("read .smolmachine", err)
		}
		if !want[h.Name] || h.Typeflag != tar.TypeReg {
			return nil, agentError("read .smolmachine", fmt.Errorf("%s: unexpected entry %q", artifact, h.Name))
		}
		delete(want, h.Name)
		if h.Name == packManifest {
			if m, err = readManifest(tr, artifact); err != nil {
				return nil, err
			}
			continue
		}
		if err := writeEntry(filepath.Join(dest, h.Name), tr); err != nil {
			return nil, agentError("extract sidecar", err)
		}
	}
	if len(want) > 0 || m == nil {
		return nil, agentError("read .smolmachine", fmt.Errorf("%s: incomplete pack", artifact))
	}
	if err := os.WriteFile(filepath.Join(dest, extractedMarker), nil, 0o600); err != nil {
		return nil, storageError("extract pack", err)
	}
	return m, nil
}

func readManifest(r io.Reader, artifact string) (*Manifest, error) {
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&m); err != nil {
		return nil, agentError("read .smolmachine", fmt.Errorf("%s: manifest: %w", artifact, err))
	}
	if m.Format != packFormat {
		return nil, agentError("read .smolmachine", fmt.Errorf("%s: format %q, want %q", artifact, m.Format, packFormat))
	}
	return &m, nil
}

func writeEntry(path string, r io.Reader) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
