package chunkstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// The box benchmark's tree is shaped like a real box: a root file system
// of system files, binaries, a node_modules forest and a Python venv, and
// a workspace with a few large files. HB_BENCH_BOX_MB sizes it (default
// 2048: about 2 GB and 100,000 entries, 50 entries a MB).
func boxBenchMB() int {
	if n, err := strconv.Atoi(os.Getenv("HB_BENCH_BOX_MB")); err == nil && n > 0 {
		return n
	}
	return 2048
}

// genBox writes the tree below dir as a box's root: the root file system
// at dir, the workspace at dir/workspace.
func genBox(dir string, mb int) error {
	g := &boxGen{rng: rand.New(rand.NewPCG(28, 1))}
	g.pool = g.text(64 << 20)
	entries := mb * 50
	classes := []struct {
		dir      string
		share    float64 // of the entries
		min, max int
		noise    float64 // share of random bytes
	}{
		{"usr/share/doc/pkg%03d", 0.20, 200, 6 << 10, 0},
		{"usr/lib/node_modules/mod%04d", 0.45, 300, 8 << 10, 0},
		{"opt/venv/lib/python3.12/site-packages/pkg%03d", 0.25, 500, 16 << 10, 0.05},
		{"usr/lib/x86_64-linux-gnu/lib%03d", 0.08, 20 << 10, 400 << 10, 0.6},
		{"workspace/work/src/dir%03d", 0.02, 500, 20 << 10, 0},
	}
	for _, c := range classes {
		n := int(c.share * float64(entries))
		for i := range n {
			sub := filepath.Join(dir, fmt.Sprintf(c.dir, i/100))
			if i%100 == 0 {
				if err := os.MkdirAll(sub, 0o755); err != nil {
					return err
				}
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d", i)), g.file(c.min, c.max, c.noise), 0o644); err != nil {
				return err
			}
		}
	}
	if err := boxAccounts(dir); err != nil {
		return err
	}
	ws := filepath.Join(dir, "workspace")
	for _, d := range []string{"hermes-home", "codex-home"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "hermes-home/config.yaml"), []byte("model: x\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ws, "codex-home/config.toml"), []byte("x = 1\n"), 0o644); err != nil {
		return err
	}
	// The large files: a third of the bytes, half text, half random.
	large := int64(mb) << 20 / 3 / 4
	for i := range 4 {
		if err := g.large(filepath.Join(ws, "work", fmt.Sprintf("large%d.bin", i)), large, float64(i%2)); err != nil {
			return err
		}
	}
	return nil
}

type boxGen struct {
	rng  *rand.Rand
	pool []byte
}

func (g *boxGen) text(n int) []byte {
	words := []string{"the", "box", "agent", "import", "return", "function", "const", "value", "module", "self", "def", "class", "=", "{", "}", "(", ")", ";", "\n", "  "}
	out := make([]byte, 0, n+16)
	for len(out) < n {
		out = append(out, words[g.rng.IntN(len(words))]...)
		out = append(out, ' ')
	}
	return out[:n]
}

func (g *boxGen) noise(b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := g.rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
}

// file is a small file: a slice of the text pool, partly random.
func (g *boxGen) file(lo, hi int, noise float64) []byte {
	n := lo + g.rng.IntN(hi-lo)
	off := g.rng.IntN(len(g.pool) - n)
	b := append([]byte(nil), g.pool[off:off+n]...)
	g.noise(b[:int(float64(n)*noise)])
	return b
}

func (g *boxGen) large(path string, size int64, noise float64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		if noise > 0 {
			g.noise(buf)
		} else {
			off := g.rng.IntN(len(g.pool) - len(buf))
			copy(buf, g.pool[off:])
		}
		if _, err := w.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// change1pct is the "1% change": every hundredth small file
// rewritten, and 1% of each large file's bytes changed, half overwritten
// in place and half inserted, at 16 places spread over the file. Changed
// files are written anew (temp, rename), so hard links to the old ones
// keep the old content.
func change1pct(dir string) error {
	g := &boxGen{rng: rand.New(rand.NewPCG(28, 2))}
	g.pool = g.text(8 << 20)
	i := 0
	cache := filepath.Join(dir, boxlayout.InRoot(boxlayout.CacheDir))
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p == cache {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var data []byte
		switch {
		case fi.Size() >= 8<<20:
			if data, err = os.ReadFile(p); err != nil {
				return err
			}
			data = g.edit(data)
		case i%100 == 0:
			data = g.file(int(fi.Size())/2+1, int(fi.Size())+2, 0)
		}
		i++
		if data == nil {
			return nil
		}
		if err := os.WriteFile(p+".new", data, 0o644); err != nil {
			return err
		}
		return os.Rename(p+".new", p)
	})
}

func (g *boxGen) edit(data []byte) []byte {
	const spots = 16
	per := len(data) / 100 / 2 / spots
	out := make([]byte, 0, len(data)+per*spots)
	step := len(data) / spots
	for s := range spots {
		part := data[s*step : min((s+1)*step, len(data))]
		if s == spots-1 {
			part = data[s*step:]
		}
		over := make([]byte, per)
		g.noise(over)
		copy(part[step/4:], over)
		ins := make([]byte, per)
		g.noise(ins)
		out = append(append(append(out, part[:step*3/4]...), ins...), part[step*3/4:]...)
	}
	return out
}

// agentWrite is the v2 snapshot's source: the agent's `snapshot write
// PART` of the box whose root is root (a gzip tar of the part).
func agentWrite(agent, root string) backup.PartSource {
	return func(ctx context.Context, part string, w io.Writer) error {
		cmd := exec.CommandContext(ctx, agent, "--root", root, "snapshot", "write", part)
		cmd.Stdout = w
		return runAgent(cmd)
	}
}

// agentChunks is the incremental snapshot's source: the agent's
// `snapshot chunks PART` (the held chunk ids on its stdin, the chunks the
// host lacks on its stdout), with its cache of the last snapshot.
func agentChunks(agent, root string) ChunkSource {
	return func(ctx context.Context, part string, held io.Reader, w io.Writer) error {
		cmd := exec.CommandContext(ctx, agent, "--root", root, "snapshot", "chunks", part)
		cmd.Stdin, cmd.Stdout = held, w
		return runAgent(cmd)
	}
}

func runAgent(cmd *exec.Cmd) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %w: %s", cmd.Args, err, stderr.Bytes())
	}
	return nil
}

// buildAgent builds the agent as a release builds it.
func buildAgent(dir string) (string, error) {
	out := filepath.Join(dir, "hermes-box-agent")
	cmd := exec.Command("go", "build", "-o", out, "./guest-agent")
	cmd.Dir = filepath.Join("..", "..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the agent: %w: %s", err, b)
	}
	return out, nil
}

var (
	boxOnce   sync.Once
	boxDir    string
	boxErr    error
	agentOnce sync.Once
	benchDir  string
	boxAgent  string
	agentErr  error
)

// benchAgent builds the agent once per process, in the benchmarks'
// directory.
func benchAgent(b *testing.B) (dir, agent string) {
	agentOnce.Do(func() {
		if benchDir, agentErr = os.MkdirTemp("", "hb-store-bench-"); agentErr == nil {
			boxAgent, agentErr = buildAgent(benchDir)
		}
	})
	if agentErr != nil {
		b.Fatal(agentErr)
	}
	return benchDir, boxAgent
}

// pristineBox generates the synthetic tree once per process.
func pristineBox(b *testing.B) (dir, agent string) {
	base, agent := benchAgent(b)
	boxOnce.Do(func() {
		boxDir = filepath.Join(base, "synthetic")
		boxErr = genBox(filepath.Join(boxDir, "pristine"), boxBenchMB())
	})
	if boxErr != nil {
		b.Fatal(boxErr)
	}
	return boxDir, agent
}

// peakHeap samples the live heap every 5 ms while f runs and returns the
// largest sample, in MiB.
func peakHeap(f func() error) (float64, error) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var top uint64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			top = max(top, s[0].Value.Uint64())
			select {
			case <-stop:
				peak <- top
				return
			case <-t.C:
			}
		}
	}()
	err := f()
	close(stop)
	return float64(<-peak) / (1 << 20), err
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func timed(f func() error) (float64, error) {
	start := time.Now()
	err := f()
	return time.Since(start).Seconds(), err
}

// BenchmarkIncrementalBox runs the scenario on two box-shaped
// trees, synthetic (genBox, change1pct) and real (genReal, changeReal),
// each snapshot through the real agent (built as a release builds it, run
// on the tree as its root): a v2 snapshot (`snapshot write`, into
// backup.Write) and an incremental one (`snapshot chunks` with its cache
// and the held-chunk exchange, into Ingest), the change, again both, and
// restic's and borg's two backups of the same tree; then a restore of
// each: the v2 backup staged; the incremental one staged from the store,
// and in full (staged, then applied by the agent into an empty root, as a
// fresh restore does); restic's restore and borg's extract into an empty
// directory. The incremental restore must give the v2 restore's root
// file system listing. Added bytes are every tool's growth on disk.
func BenchmarkIncrementalBox(b *testing.B) {
	trees := []struct {
		name   string
		make   func(*testing.B) (string, string)
		change func(context.Context, string) error
	}{
		{"synthetic", pristineBox, func(_ context.Context, dir string) error { return change1pct(dir) }},
		{"real", pristineReal, changeReal},
	}
	for _, tr := range trees {
		b.Run(tr.name, func(b *testing.B) {
			base, agent := tr.make(b)
			for b.Loop() {
				m, err := runBox(b, base, agent, tr.change)
				if err != nil {
					b.Fatal(err)
				}
				for k, v := range m {
					b.ReportMetric(v, k)
				}
			}
		})
	}
}

func runBox(b *testing.B, base, agent string, change func(context.Context, string) error) (map[string]float64, error) {
	ctx := context.Background()
	work := b.TempDir()
	box := filepath.Join(work, "box")
	if out, err := exec.CommandContext(ctx, "cp", "-al", filepath.Join(base, "pristine"), box).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cp -al: %v: %s", err, out)
	}
	m := map[string]float64{}
	v2Dir, incDir := filepath.Join(work, "v2"), filepath.Join(work, "inc")
	tools := baselines(b, work)
	var v2Last, incLast string
	for _, gen := range []string{"first", "second"} {
		if gen == "second" {
			if err := change(ctx, box); err != nil {
				return nil, fmt.Errorf("changing the tree: %w", err)
			}
		}
		mt := meta(len(gen))
		before := dirSize(v2Dir)
		t, err := timed(func() (err error) { v2Last, err = backup.Write(ctx, v2Dir, mt, agentWrite(agent, box)); return err })
		if err != nil {
			return nil, fmt.Errorf("v2 %s: %w", gen, err)
		}
		m["v2-"+gen+"-s"], m["v2-"+gen+"-MB"] = t, float64(dirSize(v2Dir)-before)/1e6
		var rec *Record
		before = dirSize(incDir)
		start := time.Now()
		peak, err := peakHeap(func() (err error) {
			incLast, rec, err = Ingest(ctx, incDir, mt, agentChunks(agent, box), nil)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("incremental %s: %w", gen, err)
		}
		m["inc-"+gen+"-s"], m["inc-"+gen+"-peak-MiB"] = time.Since(start).Seconds(), peak
		// On disk: packs, index and record, as the baselines' repositories
		// are measured; the chunks' own compressed bytes beside it.
		m["inc-"+gen+"-added-MB"], m["inc-"+gen+"-stored-MB"] = float64(dirSize(incDir)-before)/1e6, float64(rec.Added.Stored)/1e6
		if m["inc-"+gen+"-tree-B-per-entry"], err = treeBytesPerEntry(incDir, rec); err != nil {
			return nil, err
		}
		for name, tool := range tools {
			t, added, err := tool.backup(ctx, box)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", name, gen, err)
			}
			m[name+"-"+gen+"-s"], m[name+"-"+gen+"-added-MB"] = t, float64(added)/1e6
			if r, ok := tool.(*resticRepo); ok {
				m["restic-"+gen+"-data-added-raw-MB"] = r.raw / 1e6
			}
		}
	}
	if err := restores(ctx, m, work, v2Last, incDir, incLast, agent); err != nil {
		return nil, err
	}
	for name, tool := range tools {
		t, err := tool.restore(ctx, filepath.Join(work, name+"-restored"))
		if err != nil {
			return nil, err
		}
		m[name+"-restore-s"] = t
		os.RemoveAll(filepath.Join(work, name+"-restored"))
	}
	return m, nil
}

// restores stages the v2 and the incremental backup, checks that they
// list the same root file system, and restores the incremental one in
// full: staged, then applied by the agent into an empty root.
func restores(ctx context.Context, m map[string]float64, work, v2Last, incDir, incLast, agent string) error {
	stateDir := filepath.Join(work, "state")
	var v2Sums, incSums backup.Sums
	t, err := timed(func() error {
		s, err := backup.Stage(ctx, v2Last, stateDir, trust, testLimits)
		if err == nil {
			v2Sums, err = s.Sums, s.Remove()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("v2 restore: %w", err)
	}
	m["v2-restore-s"] = t
	start := time.Now()
	target := filepath.Join(work, "inc-restored")
	var stage float64
	peak, err := peakHeap(func() (err error) {
		incSums, stage, err = restoreInc(ctx, incDir, incLast, stateDir, agent, target)
		return err
	})
	if err != nil {
		return fmt.Errorf("incremental restore: %w", err)
	}
	m["inc-restore-s"], m["inc-restore-full-s"], m["inc-restore-peak-MiB"] = stage, time.Since(start).Seconds(), peak
	if v2Sums[backup.FileListing] != incSums[backup.FileListing] {
		return fmt.Errorf("the incremental backup restores another root file system listing than the v2 backup of the same tree")
	}
	return os.RemoveAll(target)
}

// treeBytesPerEntry is the size of rec's trees (both parts, plaintext)
// over its entries.
func treeBytesPerEntry(backups string, rec *Record) (float64, error) {
	s, err := Open(StoreDir(backups, "box"))
	if err != nil {
		return 0, err
	}
	defer s.Close()
	var bytes, entries int64
	for _, p := range rec.Parts {
		ids, err := p.treeIDs()
		if err != nil {
			return 0, err
		}
		for _, id := range ids {
			n, ok := s.RawSize(id)
			if !ok {
				return 0, fmt.Errorf("tree chunk %s missing", id)
			}
			bytes += n
		}
		entries += p.Entries
	}
	return float64(bytes) / float64(entries), nil
}

// restoreInc is a full restore of an incremental backup into target:
// the host loads its record and stages it in one pass from the store
// (every chunk re-hashed), then the agent applies the staged parts into
// target as a fresh restore does (`snapshot apply`). It returns the
// staged backup's sums and the seconds the host's side (load and stage)
// took.
func restoreInc(ctx context.Context, backups, dir, stateDir, agent, target string) (backup.Sums, float64, error) {
	start := time.Now()
	rec, err := Load(dir, trust)
	if err != nil {
		return nil, 0, err
	}
	s, err := Open(StoreDir(backups, "box"))
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	staged, err := s.Stage(ctx, rec, stateDir, testLimits, projectKey)
	if err != nil {
		return nil, 0, err
	}
	defer staged.Remove()
	stage := time.Since(start).Seconds()
	if err := applyInto(ctx, staged.Dir, agent, target); err != nil {
		return nil, 0, err
	}
	return staged.Sums, stage, nil
}

// applyInto streams the staged backup in dir to the agent's `snapshot
// apply` on the root target.
func applyInto(ctx context.Context, dir, agent, target string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	key := ssh.MarshalAuthorizedKey(projectKey.PublicKey())
	go func() { pw.CloseWithError(backup.WriteApply(dir, key, pw)) }()
	cmd := exec.CommandContext(ctx, agent, "--root", target, "snapshot", "apply")
	cmd.Stdin = pr
	err := runAgent(cmd)
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("applying the staged backup: %w", err)
	}
	return nil
}
