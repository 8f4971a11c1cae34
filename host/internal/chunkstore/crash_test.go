package chunkstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The crash tests re-run this test binary as a process that writes to or
// collects a store and SIGKILLs itself at the step named in envCrashAt.
const (
	envCrashOp  = "HB_TEST_STORE_CRASH_OP"
	envCrashAt  = "HB_TEST_STORE_CRASH_AT"
	envCrashDir = "HB_TEST_STORE_CRASH_DIR"
)

func TestMain(m *testing.M) {
	if op := os.Getenv(envCrashOp); op != "" {
		os.Exit(crashHelper(op))
	}
	code := m.Run()
	if plainOnce.exe != "" {
		_ = os.RemoveAll(filepath.Dir(plainOnce.exe)) // runPlain's test binary
	}
	if benchDir != "" {
		_ = os.RemoveAll(benchDir) // the box benchmark's trees and agent
	}
	os.Exit(code)
}

// The test sets: a is committed before the crash and always kept; b is
// what the crashing process writes, or what its GC drops.
var (
	setA = func() [][]byte { return set("a", 12, 200<<10) }
	setB = func() [][]byte { return set("b", 40, 300<<10) } // two packs
)

func crashHelper(op string) int {
	at := os.Getenv(envCrashAt)
	crashPoint = func(step string) {
		if step == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	storeDir := os.Getenv(envCrashDir)
	if op == "snapshot" || op == "ingest" {
		storeDir = StoreDir(storeDir, "box")
	}
	s, err := Open(storeDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch op {
	case "write":
		var w *Writer
		if w, err = s.NewWriter(); err == nil {
			for _, c := range setB() {
				if _, err = w.Put(Sum(c), c); err != nil {
					break
				}
			}
		}
		if err == nil {
			err = w.Commit()
		}
	case "gc":
		_, err = s.GC(marked(s, setA()))
	case "ingest":
		s.Close()
		_, _, err = Ingest(context.Background(), os.Getenv(envCrashDir), meta(1), chunkAgent(boxParts(1), agentMutation{}, nil), nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func marked(s *Store, live [][]byte) *Marks {
	m := s.NewMarks()
	for _, c := range live {
		m.Mark(Sum(c))
	}
	return m
}

func runCrash(t *testing.T, op, at, dir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCrashOp+"="+op, envCrashAt+"="+at, envCrashDir+"="+dir)
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s did not crash at %s: %v\n%s", op, at, err, out)
	}
}

// TestCrashWrite kills a writer at each step: the committed chunks stay
// readable, the new ones are held all or not at all (all only once the
// index is published), no temp file survives the next Open, and GC
// removes what the crash left.
func TestCrashWrite(t *testing.T) {
	a, b := setA(), setB()
	for _, at := range []string{"before-rename-.pack", "pack-published", "before-rename-.idx", "index-published"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			put(t, openStore(t, dir), a)
			runCrash(t, "write", at, dir)
			s := openStore(t, dir)
			mustRead(t, s, a)
			switch n := held(s, b); {
			case at == "index-published" && n != len(b):
				t.Fatalf("%d of %d chunks held after the index was published", n, len(b))
			case at != "index-published" && n != 0:
				t.Fatalf("%d chunks held before the index was published", n)
			}
			for _, f := range files(t, dir) {
				if strings.Contains(f, "/"+tmpPrefix) {
					t.Fatalf("temp file %s survived Open", f)
				}
			}
			if _, err := s.GC(marked(s, a)); err != nil {
				t.Fatal(err)
			}
			mustRead(t, s, a)
			if held(s, b) != 0 {
				t.Fatal("GC kept unmarked chunks")
			}
			if _, err := s.GC(marked(s, a)); err != nil {
				t.Fatal(err)
			}
			if got := len(files(t, dir)); got != 2 {
				t.Fatalf("after GC: %v, want one pack and one index", files(t, dir))
			}
		})
	}
}

// TestCrashGC kills a GC at each step: every live chunk stays readable,
// and the next GC finishes the job.
func TestCrashGC(t *testing.T) {
	a, b := setA(), setB()
	for _, at := range []string{"before-rename-.pack", "pack-published", "before-rename-.idx", "new-index-published", "pack-removed"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			put(t, s, append(append([][]byte{}, a[:6]...), b[:30]...)) // a sparse pack: repacked
			put(t, s, append(append([][]byte{}, b[30:]...), a[6:]...))
			runCrash(t, "gc", at, dir)
			s = openStore(t, dir)
			mustRead(t, s, a)
			rep, err := s.GC(marked(s, a))
			if err != nil {
				t.Fatal(err)
			}
			mustRead(t, openStore(t, dir), a)
			if n := held(s, b); n != 0 {
				t.Fatalf("%d unmarked chunks kept (report %+v)", n, rep)
			}
		})
	}
}

func TestGCKeepsExactlyTheMarked(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	a, b := setA(), setB()
	put(t, s, append(append([][]byte{}, a[:6]...), b[:30]...))
	put(t, s, b[30:])
	put(t, s, a[6:])
	m := marked(s, a)
	if m.Mark(Sum([]byte("not held"))) {
		t.Fatal("marking a chunk the store lacks succeeded")
	}
	rep, err := s.GC(m)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ChunksRemoved != len(b) || rep.PacksRepacked != 1 || rep.PacksRemoved != 2 || rep.BytesFreed <= 0 {
		t.Fatalf("report %+v: want %d chunks removed, 1 pack repacked, 2 removed", rep, len(b))
	}
	s2 := openStore(t, dir)
	mustRead(t, s2, a)
	if s2.Len() != len(a) || held(s2, b) != 0 {
		t.Fatalf("after GC %d chunks held, %d of them unmarked", s2.Len(), held(s2, b))
	}
	if rep, err := s2.GC(marked(s2, a)); err != nil || rep != (GCReport{}) {
		t.Fatalf("a second GC did %+v, %v; want nothing", rep, err)
	}
}

// TestCrashSnapshot kills an incremental snapshot (Ingest of the agent's
// chunk streams) at each step: the last backup still restores, the new
// one exists only once published (and then restores), and a collection
// afterwards leaves exactly what the backups need.
func TestCrashSnapshot(t *testing.T) {
	for _, at := range []string{"before-rename-.pack", "pack-published", "index-published", "record-written", "published", "part-received"} {
		t.Run("ingest/"+at, func(t *testing.T) { crashSnapshot(t, "ingest", at) })
	}
}

func crashSnapshot(t *testing.T, op, at string) {
	backups := t.TempDir()
	dir0, _ := snapshot(t, backups, 0)
	runCrash(t, op, at, backups)
	restored(t, backups, dir0, 0)
	if _, err := Collect(context.Background(), backups, "box", trust); err != nil {
		t.Fatal(err)
	}
	dirs, recs, err := Backups(backups, "box", trust)
	must(t, err)
	if want := map[bool]int{true: 2, false: 1}[at == "published"]; len(dirs) != want {
		t.Fatalf("%d backups after the crash, want %d", len(dirs), want)
	}
	if entries, _ := os.ReadDir(backups); len(entries) != len(dirs)+1 {
		t.Fatalf("the backups directory holds %v", entries)
	}
	restored(t, backups, dirs[len(dirs)-1], len(dirs)-1)
	s := openStore(t, StoreDir(backups, "box"))
	m := s.NewMarks()
	for _, rec := range recs {
		must(t, s.Mark(context.Background(), rec, m))
	}
	if rep, err := s.GC(m); err != nil || rep != (GCReport{}) {
		t.Fatalf("a collection after the first removed %+v (%v): the first missed garbage", rep, err)
	}
}
