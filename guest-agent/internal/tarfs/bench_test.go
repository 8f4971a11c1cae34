package tarfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/tarfs/tarfstest"
)

// unpackEnv makes the test binary a one-shot unpacker (blobs JSON, dest,
// selection), so the benchmark times and measures a whole process, as it
// does GNU tar and umoci.
const unpackEnv = "HBX_TARFS_UNPACK"

func TestMain(m *testing.M) {
	if v := os.Getenv(unpackEnv); v != "" {
		if err := unpackMain(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// The peak of this process's own memory: a rusage of the child
		// would count the parent's, whose address space it started in.
		status, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				fmt.Println(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func unpackMain(arg string) error {
	var req struct {
		Blobs    []Blob
		Dest     string
		Executor bool
	}
	if err := json.Unmarshal([]byte(arg), &req); err != nil {
		return err
	}
	opt := UnpackOptions{UID: -1, GID: -1}
	if req.Executor {
		opt.Select = executorSelect
	}
	return UnpackBlobs(context.Background(), req.Blobs, req.Dest, opt)
}

// executorSelect is oci.KeepExecutor (tarfs may not import oci).
func executorSelect(parts []string) Selected {
	bun := []string{"usr", "local", "bin", "bun"}
	switch {
	case len(parts) == 0:
		return NotSelected
	case parts[0] == "app" && len(parts) == 1:
		return SelectedDir
	case parts[0] == "app":
		return SelectedAll
	case len(parts) > len(bun) || !slices.Equal(parts, bun[:len(parts)]):
		return NotSelected
	case len(parts) == len(bun):
		return SelectedAll
	}
	return SelectedDir
}

// realShaped is the generated image, kept between runs in the temporary
// directory (generating it takes longer than unpacking it).
func realShaped(b *testing.B) []tarfstest.Layer {
	dir := filepath.Join(os.TempDir(), "hermes-box-realshape-v2")
	done := filepath.Join(dir, "done.json")
	var ls []tarfstest.Layer
	if data, err := os.ReadFile(done); err == nil && json.Unmarshal(data, &ls) == nil {
		return ls
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	ls, err := tarfstest.RealShaped(dir)
	if err != nil {
		b.Fatal(err)
	}
	data, _ := json.Marshal(ls)
	if err := os.WriteFile(done, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return ls
}

func blobsOf(b *testing.B, ls []tarfstest.Layer) []Blob {
	var out []Blob
	for _, l := range ls {
		f, err := os.Open(l.Path)
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, Blob{Path: l.Path, MediaType: MediaTypeLayerGzip, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: n})
	}
	return out
}

// benchFS is one file system the benchmark unpacks onto.
type benchFS struct {
	name string
	dir  string
}

// benchFileSystems are tmpfs (/dev/shm) and disk (HBX_BENCH_DISK_DIR,
// default /var/tmp), each only if it is what its name says.
func benchFileSystems(b *testing.B) []benchFS {
	var out []benchFS
	disk := os.Getenv("HBX_BENCH_DISK_DIR")
	if disk == "" {
		disk = "/var/tmp"
	}
	for _, fs := range []benchFS{{"tmpfs", "/dev/shm"}, {"disk", disk}} {
		var st syscall.Statfs_t
		if err := syscall.Statfs(fs.dir, &st); err != nil {
			b.Logf("no %s row: %v", fs.name, err)
			continue
		}
		if isTmpfs := st.Type == 0x01021994; isTmpfs != (fs.name == "tmpfs") {
			b.Logf("no %s row: %s is not %s", fs.name, fs.dir, fs.name)
			continue
		}
		dir, err := os.MkdirTemp(fs.dir, "hermes-box-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		out = append(out, benchFS{fs.name, dir})
	}
	return out
}

// result is one timed run of a tool.
type result struct {
	wall, cpu time.Duration
	out       string
}

// run times one tool as a whole process, after writing back what earlier
// runs left dirty so no run pays for another's.
func run(b *testing.B, cmd *exec.Cmd) result {
	syscall.Sync()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s: %v\n%s", cmd.Args, err, out.String())
	}
	wall := time.Since(start)
	return result{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), out: out.String()}
}

// fresh returns an empty directory path below dir (removed first, outside
// any timing).
func fresh(b *testing.B, dir, name string) string {
	p := filepath.Join(dir, name)
	if err := os.RemoveAll(p); err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		b.Fatal(err)
	}
	return p
}

// umociLayout writes an OCI layout (tag "bench") of the blobs for the
// umoci CLI.
func umociLayout(b *testing.B, dir string, blobs []Blob) string {
	layout := filepath.Join(dir, "umoci-layout")
	shaDir := filepath.Join(layout, "blobs", "sha256")
	if err := os.MkdirAll(shaDir, 0o755); err != nil {
		b.Fatal(err)
	}
	put := func(data []byte) (string, int64) {
		sum := sha256.Sum256(data)
		h := hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(shaDir, h), data, 0o644); err != nil {
			b.Fatal(err)
		}
		return "sha256:" + h, int64(len(data))
	}
	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	var layers []desc
	var diffIDs []string
	for _, bl := range blobs {
		if err := os.Link(bl.Path, filepath.Join(shaDir, strings.TrimPrefix(bl.Digest, "sha256:"))); err != nil {
			data, rerr := os.ReadFile(bl.Path)
			if rerr != nil {
				b.Fatal(rerr)
			}
			put(data)
		}
		layers = append(layers, desc{MediaType: bl.MediaType, Digest: bl.Digest, Size: bl.Size})
		diffIDs = append(diffIDs, diffID(b, bl))
	}
	cfg, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux",
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs}, "config": map[string]any{}})
	cd, cs := put(cfg)
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc{MediaType: "application/vnd.oci.image.config.v1+json", Digest: cd, Size: cs}, "layers": layers})
	md, ms := put(man)
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []desc{{MediaType: "application/vnd.oci.image.manifest.v1+json",
		Digest: md, Size: ms, Annotations: map[string]string{"org.opencontainers.image.ref.name": "bench"}}}})
	if err := os.WriteFile(filepath.Join(layout, "index.json"), idx, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		b.Fatal(err)
	}
	return layout
}

func diffID(b *testing.B, bl Blob) string {
	s, err := openBlob(bl)
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	h := sha256.New()
	if _, err := io.Copy(h, onlyReader{s.tar}); err != nil {
		b.Fatal(err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// umociPath finds the umoci CLI (HBX_UMOCI or PATH); it is a benchmark
// tool only, never a dependency.
func umociPath() string {
	if p := os.Getenv("HBX_UMOCI"); p != "" {
		return p
	}
	p, _ := exec.LookPath("umoci")
	return p
}

// BenchmarkUnpackRealShaped unpacks the real-shaped image (54,876 entries,
// three gzip -6 layers) as whole processes taking turns: the agent's unpack
// (digest check, pre-check, every path; and the Executor selection), GNU
// tar -xzf of each layer, and the umoci CLI when one is installed. Each
// iteration checks the agent's tree against tar's (whiteouts applied).
// Metrics: seconds per tool and file system, ratios to tar, peak RSS.
func BenchmarkUnpackRealShaped(b *testing.B) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		b.Skip("GNU tar not found")
	}
	ls := realShaped(b)
	blobs := blobsOf(b, ls)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	umoci := umociPath()
	if umoci == "" {
		b.Log("no umoci row: umoci not on PATH (set HBX_UMOCI)")
	}
	fss := benchFileSystems(b)
	var layout string
	if umoci != "" && len(fss) > 0 {
		layout = umociLayout(b, filepath.Dir(ls[0].Path), blobs)
	}
	agent := func(dest string, executor bool) *exec.Cmd {
		req, _ := json.Marshal(map[string]any{"Blobs": blobs, "Dest": dest, "Executor": executor})
		cmd := exec.CommandContext(b.Context(), self, "-test.run=^$")
		cmd.Env = append(os.Environ(), unpackEnv+"="+string(req))
		return cmd
	}
	turn := 0
	for b.Loop() {
		for _, fs := range fss {
			turn++
			unpackTurn(b, fs, turn, tarBin, umoci, layout, ls, agent)
		}
	}
}

// unpackTurn runs each tool once on fs, in an order that changes every
// turn, then checks the agent's tree against tar's.
func unpackTurn(b *testing.B, fs benchFS, turn int, tarBin, umoci, layout string, ls []tarfstest.Layer, agent func(string, bool) *exec.Cmd) {
	var tarRes, agentRes, selRes, umociRes result
	tools := []func(){
		func() {
			ref := fresh(b, fs.dir, "tar")
			for _, l := range tarfstest.Layers(ls) {
				r := run(b, exec.CommandContext(b.Context(), tarBin, "--no-same-owner", "-xzf", l, "-C", ref))
				tarRes.wall, tarRes.cpu = tarRes.wall+r.wall, tarRes.cpu+r.cpu
			}
		},
		func() { agentRes = run(b, agent(fresh(b, fs.dir, "agent"), false)) },
		func() { selRes = run(b, agent(fresh(b, fs.dir, "executor"), true)) },
	}
	if umoci != "" {
		tools = append(tools, func() {
			bundle := filepath.Join(fs.dir, "umoci")
			if err := os.RemoveAll(bundle); err != nil {
				b.Fatal(err)
			}
			umociRes = run(b, exec.CommandContext(b.Context(), umoci, "unpack", "--rootless", "--image", layout+":bench", bundle))
		})
	}
	for i := range tools {
		tools[(i+turn)%len(tools)]()
	}
	if umoci != "" {
		b.ReportMetric(umociRes.wall.Seconds(), "umoci-"+fs.name+"-s")
		b.ReportMetric(umociRes.wall.Seconds()/tarRes.wall.Seconds(), "umoci/tar-"+fs.name)
	}
	b.ReportMetric(tarRes.wall.Seconds(), "tar-"+fs.name+"-s")
	b.ReportMetric(tarRes.cpu.Seconds(), "tar-cpu-"+fs.name+"-s")
	b.ReportMetric(agentRes.wall.Seconds(), "agent-"+fs.name+"-s")
	b.ReportMetric(agentRes.cpu.Seconds(), "agent-cpu-"+fs.name+"-s")
	b.ReportMetric(agentRes.wall.Seconds()/tarRes.wall.Seconds(), "agent/tar-"+fs.name)
	b.ReportMetric(selRes.wall.Seconds(), "agent-executor-paths-"+fs.name+"-s")
	kib, err := strconv.ParseFloat(strings.TrimSpace(agentRes.out), 64)
	if err != nil {
		b.Fatalf("agent's peak memory: %q", agentRes.out)
	}
	b.ReportMetric(kib/1024, "agent-peak-rss-"+fs.name+"-MiB")
	// Check the output: tar's tree with the whiteouts applied.
	want := fresh(b, fs.dir, "want")
	if err := tarfstest.TarReference(b.Context(), tarBin, tarfstest.Layers(ls), want); err != nil {
		b.Fatal(err)
	}
	if err := tarfstest.CompareTrees(want, filepath.Join(fs.dir, "agent")); err != nil {
		b.Fatalf("the agent's tree differs from tar's: %v", err)
	}
}
