package backupset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// The crash test re-runs this test binary as a process that prunes and
// SIGKILLs itself at the step named in envCrashAt.
const (
	envCrashAt  = "HB_TEST_PRUNE_CRASH_AT"
	envCrashDir = "HB_TEST_PRUNE_CRASH_DIR"
)

func TestMain(m *testing.M) {
	if at := os.Getenv(envCrashAt); at != "" {
		crashPoint = func(step string) {
			if step == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
		if _, err := Prune(context.Background(), pruneRequest(os.Getenv(envCrashDir), false)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// policyBox are the backups of the prune tests (the policy test's "rules
// combine" times), v2 and incremental mixed, and the names the policy
// keeps.
var policyBox = []struct {
	when        string
	incremental bool
	kept        bool
}{
	{"2024-05-01 10:00", false, false},
	{"2024-05-06 10:00", true, true},
	{"2024-05-13 09:00", true, false},
	{"2024-05-13 10:00", false, true},
	{"2024-05-14 10:00", true, true},
	{"2024-05-14 11:00", true, true},
}

func pruneRequest(dir string, dry bool) PruneRequest {
	return PruneRequest{Dir: dir, Machine: "box", Policy: Policy{Last: 2, Daily: 2, Weekly: 2},
		Key: projectKey.PublicKey(), DryRun: dry, Loc: time.UTC}
}

// writePolicyBox writes policyBox's backups and one of another machine
// into dir and returns the names prune keeps and those it removes.
func writePolicyBox(t *testing.T, dir string) (keep, remove []string) {
	for _, b := range policyBox {
		name := makeBackup(t, dir, "box", b.when, b.incremental)
		if b.kept {
			keep = append(keep, name)
		} else {
			remove = append(remove, name)
		}
	}
	keep = append(keep, makeBackup(t, dir, "other", "2024-05-01 09:00", true))
	slices.Sort(keep)
	return keep, remove
}

// mustVerifyAll checks every backup in dir reads back whole (every chunk
// re-hashed).
func mustVerifyAll(t *testing.T, dir string) []backup.Entry {
	t.Helper()
	entries, err := List(t.Context(), dir, ListOptions{Verify: true, ReadData: true, Key: projectKey.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Verified != backup.StateVerified {
			t.Errorf("%s: %s: %s", e.Name, e.Verified, e.Problem)
		}
	}
	return entries
}

// TestPruneKeepsWhatThePolicyKeeps prunes v2 and incremental backups of
// one machine: a dry run changes nothing and says what a prune removes;
// the prune removes exactly that, leaves the other machine's backups,
// collects the removed backups' chunks, and every backup left verifies
// reading all its data.
func TestPruneKeepsWhatThePolicyKeeps(t *testing.T) {
	dir := t.TempDir()
	keep, remove := writePolicyBox(t, dir)
	before := names(t, dir)
	store := chunkstore.StoreDir(dir, "box")
	chunksBefore := storeLen(t, store)

	dry, err := Prune(t.Context(), pruneRequest(dir, true))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); !slices.Equal(got, before) {
		t.Fatalf("a dry run changed the backups: %v, was %v", got, before)
	}
	if got := removedNames(dry.Removed); !slices.Equal(got, remove) {
		t.Errorf("dry run would remove %v, want %v", got, remove)
	}
	if storeLen(t, store) != chunksBefore {
		t.Error("a dry run collected chunks")
	}

	rep, err := Prune(t.Context(), pruneRequest(dir, false))
	if err != nil {
		t.Fatal(err)
	}
	if got := removedNames(rep.Removed); !slices.Equal(got, remove) {
		t.Errorf("removed %v, want %v", got, remove)
	}
	if got := names(t, dir); !slices.Equal(got, keep) {
		t.Errorf("left %v, want %v", got, keep)
	}
	// The dry run planned the collection the prune then ran.
	if dry.Collected == nil || rep.Collected == nil || *dry.Collected != *rep.Collected || dry.Freed != rep.Freed || rep.Freed <= 0 {
		t.Errorf("the dry run would free %d (%+v), the prune freed %d (%+v)", dry.Freed, dry.Collected, rep.Freed, rep.Collected)
	}
	if len(rep.Kept) != 4 || !slices.Equal(rep.Kept[3].Reasons, []string{"last", "daily", "weekly"}) {
		t.Errorf("kept %+v", rep.Kept)
	}
	if rep.Collected == nil || rep.Collected.ChunksRemoved == 0 || storeLen(t, store) >= chunksBefore {
		t.Errorf("the removed incremental backup's chunks were not collected: %+v", rep.Collected)
	}
	mustVerifyAll(t, dir)
}

func removedNames(es []backup.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	slices.Sort(out)
	return out
}

func storeLen(t *testing.T, dir string) int {
	t.Helper()
	s, err := chunkstore.OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.Len()
}

// TestPruneNeverRemovesTheNewestGoodBackup: a newest backup that fails
// the full verification (a damaged v2 backup, an incremental one whose
// record is forged) is set aside as invalid and left alone; the newest
// backup that verifies is kept, whatever the policy.
func TestPruneNeverRemovesTheNewestGoodBackup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		incr   bool
	}{
		{"damaged v2", func(t *testing.T, p string) { flipByte(t, filepath.Join(p, backup.FileRootfs)) }, false},
		{"forged record", func(t *testing.T, p string) { flipByte(t, filepath.Join(p, chunkstore.RecordFile)) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old := makeBackup(t, dir, "box", "2024-05-01 10:00", true)
			good := makeBackup(t, dir, "box", "2024-05-02 10:00", false)
			bad := makeBackup(t, dir, "box", "2024-05-03 10:00", tc.incr)
			tc.damage(t, filepath.Join(dir, bad))
			r := pruneRequest(dir, false)
			r.Policy = Policy{Last: 1}
			rep, err := Prune(t.Context(), r)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := names(t, dir), []string{good, bad}; !slices.Equal(got, want) {
				t.Errorf("left %v, want %v", got, want)
			}
			if tc.incr != (rep.NotCollected != "") {
				t.Errorf("not collected: %q", rep.NotCollected)
			}
			if len(rep.Invalid) != 1 || rep.Invalid[0].Name != bad || len(rep.Kept) != 1 || rep.Kept[0].Name != good || len(rep.Removed) != 1 || rep.Removed[0].Name != old {
				t.Errorf("report: kept %v, removed %v, invalid %v", rep.Kept, rep.Removed, rep.Invalid)
			}
		})
	}
}

func flipByte(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	must(t, os.Chmod(path, 0o600))
	must(t, os.WriteFile(path, data, 0o600))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPruneRefusesAnEmptyPolicy: nothing is removed.
func TestPruneRefusesAnEmptyPolicy(t *testing.T) {
	dir := t.TempDir()
	makeBackup(t, dir, "box", "2024-05-01 10:00", true)
	before := names(t, dir)
	r := pruneRequest(dir, false)
	r.Policy = Policy{}
	if _, err := Prune(t.Context(), r); !errors.Is(err, ErrEmptyPolicy) {
		t.Fatalf("err = %v", err)
	}
	if got := names(t, dir); !slices.Equal(got, before) {
		t.Errorf("left %v, want %v", got, before)
	}
}

// TestPruneCrash kills a prune while it removes a backup (once it is
// unpublished, and after its first file is deleted): no directory under
// a backup's name is half deleted, every backup listed verifies, and the
// next prune removes the leftover and ends where an uninterrupted prune
// does.
func TestPruneCrash(t *testing.T) {
	for _, at := range []string{"unpublished", "file-removed"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			keep, remove := writePolicyBox(t, dir)
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envCrashAt+"="+at, envCrashDir+"="+dir)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the prune was not killed at %s: %v: %s", at, err, out)
			}
			var leftover []string
			for _, n := range names(t, dir) {
				if strings.HasPrefix(n, prunedPrefix) {
					leftover = append(leftover, n)
				}
			}
			if len(leftover) != 1 {
				t.Fatalf("want one unpublished backup left, have %v in %v", leftover, names(t, dir))
			}
			for _, e := range mustVerifyAll(t, dir) {
				if !slices.Contains(keep, e.Name) && !slices.Contains(remove, e.Name) {
					t.Errorf("listed %s", e.Name)
				}
			}
			rep, err := Prune(t.Context(), pruneRequest(dir, false))
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Reaped) != 1 {
				t.Errorf("reaped %v", rep.Reaped)
			}
			if got := names(t, dir); !slices.Equal(got, keep) {
				t.Errorf("left %v, want %v", got, keep)
			}
			mustVerifyAll(t, dir)
		})
	}
}
