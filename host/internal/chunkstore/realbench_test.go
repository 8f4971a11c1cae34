package chunkstore

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// The real-data tree is made of files this machine has, as a box holds
// them: the Go toolchain, the Go module cache, Python's standard library
// and /usr/share/doc as the root file system; a workspace with a SQLite
// database written by Python's sqlite3, an application log and a git
// repository. Its change (changeReal) is of another design than
// change1pct's: edits to 300 source files, 3 MiB appended to the log,
// 4 MiB rewritten inside the database, a new file, a commit, two
// directories deleted and a thousand mtimes touched. Real files compress
// and deduplicate as real files do, which the synthetic tree's pool of
// words does not. HB_BENCH_BOX_MB below 1024 (a check run) leaves the Go
// toolchain and module cache out and makes the database 16 MB.

// realSources are the directories copied into the real tree's root, each
// to the same path below it; a missing one is left out.
func realSources(small bool) []string {
	dirs := []string{"/usr/lib/python3.11", "/usr/lib/python3", "/usr/share/doc"}
	if !small {
		home, _ := os.UserHomeDir()
		dirs = append(dirs, "/usr/local/go", filepath.Join(home, "go", "pkg", "mod"))
	}
	return dirs
}

// genReal writes the real-data tree below dir, as genBox does the
// synthetic one.
func genReal(ctx context.Context, dir string, small bool) error {
	copied := 0
	for _, src := range realSources(small) {
		if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
			continue
		}
		dst := filepath.Join(dir, strings.TrimPrefix(src, "/"))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := run(ctx, "", "cp", "-a", src, dst); err != nil {
			return err
		}
		copied++
	}
	if copied == 0 {
		return fmt.Errorf("none of %v is on this machine", realSources(small))
	}
	if err := boxAccounts(dir); err != nil {
		return err
	}
	ws := filepath.Join(dir, "workspace")
	for _, d := range []string{"hermes-home", "codex-home", "work"} {
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
	dbMB := 112
	if small {
		dbMB = 16
	}
	work := filepath.Join(ws, "work")
	if err := python(ctx, work, sqliteWrite, "state.db", fmt.Sprint(dbMB)); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "agent.log"), logLines(0, 16<<20), 0o644); err != nil {
		return err
	}
	return gitRepo(ctx, filepath.Join(work, "repo"), dir)
}

// boxAccounts writes the box's account databases below dir (a restore's
// apply gives boxadmin its authorized key).
func boxAccounts(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/bash\n%s:x:%d:%d::/home/%s:/bin/bash\n%s:x:%d:%d::/home/%s:/bin/bash\n",
		boxlayout.AdminUser, boxlayout.AdminUID, boxlayout.AdminUID, boxlayout.AdminUser,
		boxlayout.ServiceUser, boxlayout.ServiceUID, boxlayout.ServiceUID, boxlayout.ServiceUser)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n%s:x:%d:\n", boxlayout.AdminUser, boxlayout.AdminUID, boxlayout.ServiceUser, boxlayout.ServiceUID)
	if err := os.WriteFile(filepath.Join(dir, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "etc", "group"), []byte(group), 0o644)
}

// sqliteWrite fills a database with rows of text and numbers until it
// holds argv[2] MB (of the text).
const sqliteWrite = `
import random, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("create table notes (id integer primary key, topic text, body text, score real)")
rng = random.Random(41)
words = open("/usr/share/dict/words").read().split() if __import__("os").path.exists("/usr/share/dict/words") else "the box agent import return function value module self class".split()
target, n = int(sys.argv[2]) << 20, 0
while n < target:
    body = " ".join(rng.choice(words) for _ in range(rng.randint(20, 200)))
    db.execute("insert into notes (topic, body, score) values (?, ?, ?)", (rng.choice(words), body, rng.random()))
    n += len(body)
db.commit()
db.close()
`

// sqliteRewrite rewrites about argv[2] MB of rows spread over the
// database, in place (sqlite's own page writes).
const sqliteRewrite = `
import random, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rng = random.Random(42)
(count,) = db.execute("select count(*) from notes").fetchone()
target, n = int(sys.argv[2]) << 20, 0
start = rng.randint(1, max(1, count // 2))
for (rid, body) in db.execute("select id, body from notes where id >= ? order by id", (start,)).fetchall():
    if n >= target:
        break
    db.execute("update notes set body = ?, score = ? where id = ?", (body[::-1], rng.random(), rid))
    n += len(body)
db.commit()
db.close()
`

// logLines is an application log of n bytes, its lines numbered from
// first.
func logLines(first, n int) []byte {
	var b strings.Builder
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := first; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s INFO gateway: turn %d done in %d ms (tool calls %d, tokens %d)\n",
			ts.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i, 100+i%900, i%7, 1000+i%5000)
	}
	return []byte(b.String()[:n])
}

// gitRepo makes a git repository at dir of source files from the tree
// (Python's standard library), in two commits.
func gitRepo(ctx context.Context, dir, tree string) error {
	var src string
	for _, c := range []string{"usr/lib/python3.11/email", "usr/lib/python3/dist-packages", "usr/share/doc"} {
		if fi, err := os.Stat(filepath.Join(tree, c)); err == nil && fi.IsDir() {
			src = filepath.Join(tree, c)
			break
		}
	}
	if src == "" {
		return fmt.Errorf("no source directory for the git repository")
	}
	if err := run(ctx, "", "cp", "-r", src, dir); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "import"}} {
		if err := git(ctx, dir, args...); err != nil {
			return err
		}
	}
	return nil
}

func git(ctx context.Context, dir string, args ...string) error {
	return run(ctx, dir, "git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
		"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
}

func python(ctx context.Context, dir, script string, args ...string) error {
	return run(ctx, dir, "python3", append([]string{"-c", script}, args...)...)
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return nil
}

// changeReal is the real tree's change. The tree is a hard-linked copy
// of the pristine one, so every change writes a new file (or a copy, for
// the database that sqlite rewrites in place) and renames it over the
// old one.
func changeReal(ctx context.Context, dir string) error {
	var sources, others []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.Contains(p, "/.git/") || strings.Contains(p, "/workspace/work/") {
			return err
		}
		if ext := filepath.Ext(p); ext == ".go" || ext == ".py" {
			sources = append(sources, p)
		} else {
			others = append(others, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, p := range spread(sources, 300) {
		if err := rewrite(p, func(b []byte) []byte {
			mid := len(b) / 2
			return slices.Concat(b[:mid], []byte(fmt.Sprintf("\n// edited by the benchmark, %d\n", i)), b[mid:])
		}); err != nil {
			return err
		}
	}
	for _, p := range spread(others, 1000) {
		if err := rewrite(p, func(b []byte) []byte { return b }); err != nil {
			return err
		}
	}
	work := filepath.Join(dir, "workspace", "work")
	if err := rewrite(filepath.Join(work, "agent.log"), func(b []byte) []byte {
		return append(b, logLines(1<<22, 3<<20)...)
	}); err != nil {
		return err
	}
	db := filepath.Join(work, "state.db")
	if err := run(ctx, "", "cp", db, db+".new"); err != nil {
		return err
	}
	if err := python(ctx, work, sqliteRewrite, "state.db.new", "4"); err != nil {
		return err
	}
	if err := os.Rename(db+".new", db); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "notes.md"), logLines(0, 64<<10), 0o644); err != nil {
		return err
	}
	if err := commitChange(ctx, filepath.Join(work, "repo")); err != nil {
		return err
	}
	return deleteTwo(filepath.Join(dir, "usr", "share", "doc"))
}

// spread picks n of paths (sorted), evenly.
func spread(paths []string, n int) []string {
	slices.Sort(paths)
	if len(paths) <= n {
		return paths
	}
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, paths[i*len(paths)/n])
	}
	return out
}

// rewrite writes edit(content) to a new file and renames it over p.
func rewrite(p string, edit func([]byte) []byte) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p+".new", edit(b), fi.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(p+".new", p)
}

// commitChange edits a file of the repository and commits it.
func commitChange(ctx context.Context, repo string) error {
	var files []string
	_ = filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.Contains(p, "/.git/") {
			files = append(files, p)
		}
		return nil
	})
	for _, p := range spread(files, 5) {
		if err := rewrite(p, func(b []byte) []byte { return append(b, "\n# edited\n"...) }); err != nil {
			return err
		}
	}
	return git(ctx, repo, "commit", "-qam", "edit")
}

// deleteTwo removes the two largest directories directly below dir.
func deleteTwo(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	slices.SortFunc(dirs, func(a, b string) int {
		return int(dirSize(filepath.Join(dir, b)) - dirSize(filepath.Join(dir, a)))
	})
	for _, d := range dirs[:min(2, len(dirs))] {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			return err
		}
	}
	return nil
}

var (
	realOnce sync.Once
	realDir  string
	realErr  error
)

// pristineReal makes the real tree once per process, below the synthetic
// benchmark's directory (its agent is the same).
func pristineReal(b *testing.B) (dir, agent string) {
	base, agent := benchAgent(b)
	realOnce.Do(func() {
		realDir = filepath.Join(base, "real")
		realErr = genReal(context.Background(), filepath.Join(realDir, "pristine"), boxBenchMB() < 1024)
	})
	if realErr != nil {
		b.Fatal(realErr)
	}
	return realDir, agent
}
