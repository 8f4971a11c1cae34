package snapshot

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// maxHeaderLen bounds a frame header line of the apply stream
// (protocol.ApplyMagic documents the framing); maxKeyBytes bounds the key.
const (
	maxHeaderLen = 256
	maxKeyBytes  = 16 << 10
)

// protectedTop are top-level names that apply never removes or replaces
// from the root archive.
var protectedTop = map[string]bool{
	workspaceInRoot: true, "proc": true, "sys": true, "dev": true, "run": true,
	"tmp": true, "storage": true, "packed_layers": true,
}

// Below the root, as the archive names them: the agent binary, which apply
// keeps (the running agent rather than the archived one, so a restore never
// downgrades it), the restore-ready marker, which a machine created in
// restore mode waits for before starting services, and the workspace.
var (
	agentInRoot     = boxlayout.InRoot(boxlayout.AgentPath)
	readyInRoot     = boxlayout.InRoot(boxlayout.RestoreReady)
	workspaceInRoot = boxlayout.InRoot(boxlayout.Workspace)
)

// ApplyOptions configure Apply.
type ApplyOptions struct {
	// Root is the box's root ("/" in the box).
	Root string
	// Chown applies archived owners; true when running as root.
	Chown bool
	// Progress, if set, is told when each part starts.
	Progress func(part string)
}

// Apply reads the apply stream from r and restores the box below
// opts.Root: extract the root, replace the workspace, then (the stream read
// to its end) remove root entries the archive does not list, install the
// authorized key, mark ready. A stream without the root part (a
// workspace-only restore) replaces the workspace alone and records it as
// the image's seed (keepRestoredWorkspace). The walk of the whole root waits for the end
// of the stream so that the input keeps flowing: smolvm releases before
// 1.8.1 end an `exec -i` whose input the guest stops reading for 10 s.
func Apply(ctx context.Context, r io.Reader, opts ApplyOptions) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if line, err := readHeader(br); err != nil || line != protocol.ApplyMagic {
		return fmt.Errorf("apply stream: want %q first, got %q: %v", protocol.ApplyMagic, line, err)
	}
	var key []byte
	err := readPart(br, protocol.ApplyPartKey, opts.Progress, func(pr io.Reader) error {
		var err error
		key, err = readKey(pr)
		return err
	})
	if err != nil {
		return err
	}
	line, err := readHeader(br)
	if err != nil {
		return fmt.Errorf("apply stream: part %s: %w", boxlayout.PartRootfs, err)
	}
	// A workspace-only restore leaves the root part out: the box keeps the
	// root file system it was created with (the current base image's).
	workspaceOnly := strings.HasPrefix(line, "part "+boxlayout.PartWorkspace+" ")
	pruneRoot := func() error { return nil }
	if !workspaceOnly {
		if err := consumePart(br, line, boxlayout.PartRootfs, opts.Progress, func(pr io.Reader) error {
			var err error
			pruneRoot, err = applyRoot(ctx, pr, opts)
			return err
		}); err != nil {
			return err
		}
		if line, err = readHeader(br); err != nil {
			return fmt.Errorf("apply stream: part %s: %w", boxlayout.PartWorkspace, err)
		}
	}
	if err := consumePart(br, line, boxlayout.PartWorkspace, opts.Progress, func(pr io.Reader) error { return applyWorkspace(ctx, pr, opts) }); err != nil {
		return err
	}
	if line, err := readHeader(br); err != nil || line != "end" {
		return fmt.Errorf("apply stream: want \"end\", got %q: %v", line, err)
	}
	if err := pruneRoot(); err != nil {
		return err
	}
	if workspaceOnly {
		if err := keepRestoredWorkspace(opts.Root); err != nil {
			return err
		}
	}
	if err := installKey(opts.Root, key, opts.Chown); err != nil {
		return err
	}
	return markReady(opts.Root)
}

func readHeader(br *bufio.Reader) (string, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return "", fmt.Errorf("reading stream header: %w", err)
	}
	if len(line) > maxHeaderLen {
		return "", errors.New("stream header too long")
	}
	return strings.TrimSuffix(string(line), "\n"), nil
}

// readPart reads one part header named want and hands the body to consume,
// then checks its size and digest.
func readPart(br *bufio.Reader, want string, progress func(string), consume func(io.Reader) error) error {
	line, err := readHeader(br)
	if err != nil {
		return fmt.Errorf("apply stream: part %s: %w", want, err)
	}
	return consumePart(br, line, want, progress, consume)
}

// consumePart is readPart of the part whose header line was read.
func consumePart(br *bufio.Reader, line, want string, progress func(string), consume func(io.Reader) error) error {
	part, err := protocol.ParseApplyHeader(line, want)
	if err != nil {
		return err
	}
	if progress != nil {
		progress(want)
	}
	h := sha256.New()
	body := &countingReader{r: io.TeeReader(io.LimitReader(br, part.Size), h)}
	if err := consume(body); err != nil {
		return fmt.Errorf("applying %s: %w", want, err)
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		return fmt.Errorf("applying %s: %w", want, err)
	}
	return checkPart(want, body.n, part.Size, h, part.SHA256)
}

func checkPart(name string, got, size int64, h hash.Hash, want string) error {
	if got != size {
		return fmt.Errorf("applying %s: stream ended after %d of %d bytes", name, got, size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != want {
		return fmt.Errorf("applying %s: sha256 %s, want %s", name, sum, want)
	}
	return nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func readKey(r io.Reader) ([]byte, error) {
	key, err := io.ReadAll(io.LimitReader(r, maxKeyBytes+1))
	if err != nil {
		return nil, err
	}
	line := strings.TrimSuffix(string(key), "\n")
	f := strings.Fields(line)
	if len(key) > maxKeyBytes || strings.ContainsAny(line, "\r\n") || len(f) < 2 ||
		!(strings.HasPrefix(f[0], "ssh-") || strings.HasPrefix(f[0], "ecdsa-") || strings.HasPrefix(f[0], "sk-")) {
		return nil, errors.New("authorized key is not one OpenSSH public key line")
	}
	return []byte(line + "\n"), nil
}

// applyRoot extracts the root archive and returns the removal of what it
// does not list (the workspace is protected, so it may run after the
// workspace part).
func applyRoot(ctx context.Context, r io.Reader, opts ApplyOptions) (removeUnlisted func() error, err error) {
	skip := func(rel string) bool {
		top, _, _ := strings.Cut(rel, "/")
		return protectedTop[top] || rel == agentInRoot || rel == readyInRoot
	}
	listed, err := extract(ctx, r, opts.Root, extractOptions{skip: skip, chown: opts.Chown})
	if err != nil {
		return nil, err
	}
	return func() error {
		st, err := os.Lstat(opts.Root)
		if err != nil {
			return err
		}
		keep := func(rel string) bool { return listed[rel] || skip(rel) }
		return prune(opts.Root, "", statOf(st).Dev, keep)
	}, nil
}

// prune removes every entry below dir+rel that keep refuses, deepest
// first, never crossing onto another file system.
func prune(root, rel string, dev uint64, keep func(string) bool) error {
	full := filepath.Join(root, filepath.FromSlash(rel))
	d, err := os.Open(full)
	if err != nil {
		return fmt.Errorf("pruning %s: %w", full, err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return fmt.Errorf("pruning %s: %w", full, err)
	}
	var errs []error
	for _, n := range names {
		child := path.Join(rel, n)
		kept := keep(child)
		cfull := filepath.Join(full, n)
		fi, err := os.Lstat(cfull)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if fi.IsDir() {
			if statOf(fi).Dev != dev {
				continue // a mount point: not ours to empty
			}
			if err := prune(root, child, dev, keep); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if !kept {
			if err := os.Remove(cfull); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", cfull, err))
			}
		}
	}
	return errors.Join(errs...)
}

// applyWorkspace empties the workspace and extracts the archive into it.
func applyWorkspace(ctx context.Context, r io.Reader, opts ApplyOptions) error {
	ws := filepath.Join(opts.Root, boxlayout.Workspace)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	st, err := os.Lstat(ws)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", ws)
	}
	if err := prune(ws, "", statOf(st).Dev, func(string) bool { return false }); err != nil {
		return err
	}
	skip := func(rel string) bool { return rel == "codex-home/tmp" || strings.HasPrefix(rel, "codex-home/tmp/") }
	_, err = extract(ctx, r, ws, extractOptions{skip: skip, chown: opts.Chown})
	return err
}

// installKey writes the destination's key as boxadmin's only authorized
// key, owned by boxadmin as the restored passwd file says.
func installKey(root string, key []byte, chown bool) error {
	uid, gid, home, err := lookupUser(root, boxlayout.AdminUser)
	if err != nil {
		return err
	}
	sshDir := filepath.Join(root, strings.TrimPrefix(home, "/"), ".ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		return fmt.Errorf("installing authorized key: %w", err)
	}
	if fi, err := os.Lstat(sshDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("installing authorized key: %s is not a directory", sshDir)
	}
	if err := os.Chmod(sshDir, 0o700); err != nil {
		return fmt.Errorf("installing authorized key: %w", err)
	}
	file := filepath.Join(sshDir, "authorized_keys")
	if err := atomicfile.Write(file, key, 0o600); err != nil {
		return fmt.Errorf("installing authorized key: %w", err)
	}
	if chown {
		for _, p := range []string{sshDir, file} {
			if err := os.Lchown(p, uid, gid); err != nil {
				return fmt.Errorf("installing authorized key: %w", err)
			}
		}
	}
	return nil
}

// lookupUser finds name in <root>/etc/passwd.
func lookupUser(root, name string) (uid, gid int, home string, err error) {
	data, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		return 0, 0, "", fmt.Errorf("looking up %s: %w", name, err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 || f[0] != name {
			continue
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || !strings.HasPrefix(f[5], "/") || strings.Contains(f[5], "..") {
			return 0, 0, "", fmt.Errorf("etc/passwd line %d: malformed entry for %s", i+1, name)
		}
		return uid, gid, f[5], nil
	}
	return 0, 0, "", fmt.Errorf("user %s not found in the restored etc/passwd", name)
}

// markReady forces an ownership repair on the next boot and writes the
// restore-ready marker, then syncs.
func markReady(root string) error {
	state := filepath.Join(root, "var", "lib", "hermes-box")
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(state, "runtime-ownership-*"))
	for _, p := range old {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := atomicfile.Write(filepath.Join(root, boxlayout.RestoreReady), nil, 0o644); err != nil {
		return err
	}
	unix.Sync()
	return nil
}

// keepRestoredWorkspace records the image's seed as the one the workspace
// holds, so that the first boot of a box whose root is the image's does
// not seed the restored workspace over (boot's workspaceSeed replaces
// every top-level entry but work/ when the ids differ). A full restore's
// root part brings both files from the backup.
func keepRestoredWorkspace(root string) error {
	id, err := os.ReadFile(filepath.Join(root, boxlayout.SeedID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the image's seed id: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(root, boxlayout.RestoredID), id, 0o600); err != nil {
		return fmt.Errorf("recording the restored workspace: %w", err)
	}
	return nil
}
