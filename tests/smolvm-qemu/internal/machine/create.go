package machine

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Defaults of smolvm 1.0.4's `machine create`.
const (
	DefaultCPUs   = 4
	DefaultMemMiB = 8192
)

// CreateOptions are the flags of `machine create`.
type CreateOptions struct {
	Name       string
	Image      string // --image: any reference maps to the stand-in's base image
	From       string // --from: a .smolmachine made by `pack create`
	CPUs, Mem  int    // 0: the Smolfile's (for --from) or smolvm's default
	Storage    *uint64
	Overlay    *uint64
	Ports      []Port
	Env        []string
	Secrets    []SecretRef
	Net        bool
	NetBackend string
}

// Create makes a stopped machine: a qcow2 disk over the base image (--image)
// or over the disk extracted from a pack into <data-dir>/pack (--from).
func (s *Store) Create(ctx context.Context, o CreateOptions, imageDir string) (err error) {
	if s.Exists(o.Name) {
		return configError("create machine", fmt.Sprintf("a machine named '%s' already exists. Use 'machine start --name %s' to start it, or 'machine delete --name %s -f' to remove it.", o.Name, o.Name, o.Name))
	}
	dir := s.DataDir(o.Name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return storageError("create data dir", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	r := &Record{
		Name: o.Name, CreatedAt: time.Now().Unix(), State: Created, CPUs: o.CPUs, MemMiB: o.Mem,
		StorageGB: o.Storage, OverlayGB: o.Overlay, Ports: o.Ports, Env: o.Env, Secrets: o.Secrets,
		Net: o.Net, NetBackend: o.NetBackend, Entrypoint: []string{}, Cmd: []string{},
	}
	var backing string
	if o.From != "" {
		m, err := extractPack(o.From, filepath.Join(dir, "pack"))
		if err != nil {
			return err
		}
		r.From, r.Entrypoint, r.Cmd, r.Workdir = o.From, m.Entrypoint, m.Cmd, m.Workdir
		r.Env = append(append([]string{}, m.Env...), r.Env...)
		r.CPUs, r.MemMiB = pick(r.CPUs, m.CPUs, DefaultCPUs), pick(r.MemMiB, m.Memory, DefaultMemMiB)
		backing, err = filepath.Abs(filepath.Join(dir, "pack", packDisk))
		if err != nil {
			return err
		}
		if err := copyFile(filepath.Join(dir, "pack", packKernel), filepath.Join(dir, kernelFile)); err != nil {
			return storageError("copy kernel", err)
		}
	} else {
		if err := mustDir(imageDir); err != nil {
			return fmt.Errorf("rootfs operation failed: image %q: SMOLVM_QEMU_IMAGE must name the directory built by images/e2e/build.sh: %w", o.Image, err)
		}
		image := o.Image
		r.Image = &image
		r.CPUs, r.MemMiB = pick(r.CPUs, 0, DefaultCPUs), pick(r.MemMiB, 0, DefaultMemMiB)
		backing = filepath.Join(imageDir, "root.img")
		if err := copyFile(filepath.Join(imageDir, kernelFile), filepath.Join(dir, kernelFile)); err != nil {
			return storageError("copy kernel", err)
		}
	}
	if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", "-F", backingFormat(backing), "-b", backing, filepath.Join(dir, diskFile)); err != nil {
		return storageError("create disk", err)
	}
	return s.Save(r)
}

func pick(vals ...int) int {
	for _, v := range vals {
		if v > 0 {
			return v
		}
	}
	return 0
}

func backingFormat(path string) string {
	if strings.HasSuffix(path, ".qcow2") {
		return "qcow2"
	}
	return "raw"
}

func qemuImg(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "qemu-img", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Update changes a stopped machine's record (smolvm refuses a running one).
func (s *Store) Update(ctx context.Context, name string, net bool) ([]string, error) {
	r, err := s.Load(name)
	if err != nil {
		return nil, configError("update", fmt.Sprintf("machine '%s' not found", name))
	}
	if st := s.State(ctx, r); st == Running || st == Unreachable {
		return nil, invalidState("stopped", st)
	}
	var changes []string
	if net && !r.Net {
		r.Net = true
		changes = append(changes, "  network: enabled")
	}
	if len(changes) == 0 {
		return nil, nil
	}
	return changes, s.Save(r)
}
