package backup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// The agent binary is built once per test process.
var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
	agentDir  string
)

func TestMain(m *testing.M) {
	if op := os.Getenv(envCrashOp); op != "" {
		os.Exit(crashHelper(op))
	}
	code := m.Run()
	for _, d := range []string{agentDir, benchRoot} {
		if d != "" {
			_ = os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

// agentBinary builds guest-agent with the local toolchain.
func agentBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(envAgentBin); p != "" {
		return p
	}
	if testing.Short() {
		t.Skip("-short: this test builds the agent and runs it (make test runs it)")
	}
	agentOnce.Do(func() {
		out, err := exec.CommandContext(context.Background(), "go", "env", "GOMOD").Output()
		if err != nil {
			agentErr = err
			return
		}
		if agentDir, agentErr = os.MkdirTemp("", "hb-agent-"); agentErr != nil {
			return
		}
		agentPath = filepath.Join(agentDir, "hermes-box-agent")
		cmd := exec.CommandContext(context.Background(), "go", "build", "-o", agentPath, "./guest-agent")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("building the agent: %v: %s", err, b)
		}
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentPath
}

// agentTransport runs the real agent binary as a child process on an
// injected root, speaking the relay protocol on its stdin: the same shape
// as relay.Transport.
type agentTransport struct {
	bin, root string
}

func (a agentTransport) Run(ctx context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (int, error) {
	var line bytes.Buffer
	if err := protocol.WriteRequest(&line, req); err != nil {
		return 0, err
	}
	in := io.Reader(&line)
	if stdin != nil {
		in = io.MultiReader(&line, stdin)
	}
	cmd := exec.CommandContext(ctx, a.bin, "--root", a.root, "relay")
	cmd.Stdin, cmd.Stdout = in, stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var lastErr string
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		ev, derr := protocol.DecodeEvent(sc.Bytes())
		if derr != nil {
			continue
		}
		if ev.Level == protocol.LevelError {
			lastErr = ev.Message
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		if ee.ExitCode() != 0 {
			return ee.ExitCode(), fmt.Errorf("agent %v: exit %d: %s", req.Argv, ee.ExitCode(), lastErr)
		}
		return 0, nil
	}
	return -1, err
}

// dirMachines is a fake machine driver: each machine is a directory
// <base>/<name> holding the guest's root in root/ and its state in files;
// the agent verbs run for real on that root.
type dirMachines struct {
	base     string
	template string // root a new machine starts from (the base image)
	bin      string
	backups  string
	key      string // authorized key line for apply
	signer   ssh.Signer
}

func (d *dirMachines) dir(name string) string  { return filepath.Join(d.base, name) }
func (d *dirMachines) root(name string) string { return filepath.Join(d.base, name, "root") }

func (d *dirMachines) Exists(_ context.Context, name string) (bool, error) {
	_, err := os.Stat(d.root(name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (d *dirMachines) state(name, file string) string {
	b, _ := os.ReadFile(filepath.Join(d.dir(name), file))
	return string(b)
}

func (d *dirMachines) setState(name, file, v string) error {
	return os.WriteFile(filepath.Join(d.dir(name), file), []byte(v), 0o600)
}

func (d *dirMachines) Running(_ context.Context, name string) (bool, error) {
	return d.state(name, "state") == "running", nil
}

func (d *dirMachines) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(d.base)
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out, err
}

func (d *dirMachines) FreePort(ctx context.Context) (int, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (d *dirMachines) SafetySnapshot(ctx context.Context, name string) (string, error) {
	s := &Snapshot{Ops: d, BackupsDir: d.backups, LeaveStopped: true,
		Meta: Meta{Machine: name, Label: "pre-restore", Smolvm: "1.0.4", GOOS: "linux", Signer: d.signer, Now: time.Now()}}
	return s.Run(ctx)
}

func (d *dirMachines) CreateRestore(ctx context.Context, name string, port int) error {
	tmp := filepath.Join(d.base, ".creating-"+name)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", d.template, filepath.Join(tmp, "root")).CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "port"), []byte(strconv.Itoa(port)), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "state"), []byte("stopped"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.dir(name))
}

func (d *dirMachines) Apply(ctx context.Context, name string, _ int, dir string) error {
	if err := d.setState(name, "state", "running"); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(WriteApply(dir, []byte(d.key), pw)) }()
	_, err := agentTransport{d.bin, d.root(name)}.Run(ctx, protocol.Request{ProtocolVersion: protocol.Version,
		Argv: []string{"snapshot", "apply"}, Options: protocol.Options{Stdin: true}}, pr, io.Discard, nil)
	_ = pr.CloseWithError(io.ErrClosedPipe)
	return err
}

func (d *dirMachines) Health(_ context.Context, name string, _ int) error {
	for _, p := range []string{"var/lib/hermes-box/restore-ready", "workspace/hermes-home/config.yaml"} {
		if _, err := os.Stat(filepath.Join(d.root(name), p)); err != nil {
			return fmt.Errorf("unhealthy: %w", err)
		}
	}
	return nil
}

func (d *dirMachines) Start(_ context.Context, name string, _ int) error {
	return d.setState(name, "state", "running")
}

func (d *dirMachines) Stop(_ context.Context, name string) error {
	if ok, _ := d.Exists(context.Background(), name); !ok {
		return fmt.Errorf("machine %s does not exist", name)
	}
	return d.setState(name, "state", "stopped")
}

func (d *dirMachines) Delete(_ context.Context, name string) error {
	trash := filepath.Join(d.base, ".trash-"+name)
	if err := os.Rename(d.dir(name), trash); err != nil {
		return err
	}
	return os.RemoveAll(trash)
}

func (d *dirMachines) StopServices(_ context.Context, name string) error {
	return d.setState(name, "services", "stopped")
}

func (d *dirMachines) StartServices(_ context.Context, name string) error {
	return d.setState(name, "services", "running")
}

func (d *dirMachines) Stream(ctx context.Context, name, part string, w io.Writer) error {
	_, err := agentTransport{d.bin, d.root(name)}.Run(ctx, protocol.Request{ProtocolVersion: protocol.Version,
		Argv: []string{"snapshot", "write", part}}, nil, w, nil)
	return err
}

// entry is what tree comparison looks at.
type entry struct {
	Mode     fs.FileMode
	UID, GID uint32
	Size     int64
	SHA256   string
	Link     string
	Hardlink string // first path of the same inode, for nlink > 1
	MTime    int64
	Xattrs   string
}

// treeOf describes every entry below dir that skip does not refuse.
func treeOf(t *testing.T, dir string, skip func(rel string) bool) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel != "." && skip != nil && skip(rel) {
			if de.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		e := entry{Mode: fi.Mode(), UID: st.Uid, GID: st.Gid}
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			e.Size, e.SHA256, e.MTime = fi.Size(), hex.EncodeToString(sum[:]), fi.ModTime().Unix()
			if st.Nlink > 1 {
				if first, ok := inodes[st.Ino]; ok {
					e.Hardlink = first
				} else {
					inodes[st.Ino] = rel
					e.Hardlink = rel
				}
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Link, _ = os.Readlink(p)
			e.MTime = fi.ModTime().Unix()
		}
		e.Xattrs = xattrString(p)
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func xattrString(p string) string {
	size, err := unix.Llistxattr(p, nil)
	if err != nil || size == 0 {
		return ""
	}
	buf := make([]byte, size)
	n, _ := unix.Llistxattr(p, buf)
	var b strings.Builder
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		val := make([]byte, 256)
		m, _ := unix.Lgetxattr(p, name, val)
		fmt.Fprintf(&b, "%s=%q;", name, val[:max(m, 0)])
	}
	return b.String()
}

// diffTrees reports the first differences between two trees.
func diffTrees(t *testing.T, want, got map[string]entry) {
	t.Helper()
	n := 0
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("missing %s", k)
		case g != w:
			t.Errorf("%s differs:\n got %+v\nwant %+v", k, g, w)
		default:
			continue
		}
		if n++; n > 10 {
			t.Fatal("too many differences")
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s", k)
		}
	}
}
