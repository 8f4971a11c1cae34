package backup

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// written is the bytes this process has written so far (/proc/self/io's
// wchar: every write(2), to any file).
func written(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			must(t, err)
			return n
		}
	}
	t.Fatal("no wchar in /proc/self/io")
	return 0
}

// TestStageBoundsASparseBackup: a backup whose workspace.tar.gz is a 3 GiB
// sparse file (a few KB on disk) and whose sums are anyone's (unsigned,
// --legacy-backup) makes Stage write at most 64 MiB before refusing: the
// part is listed as it is copied, and its size was checked against the
// part cap and the free space before any copy.
func TestStageBoundsASparseBackup(t *testing.T) {
	w := newWorld(t)
	w.addMachine(t, "box", "alpha")
	good, err := w.snapshot(t.Context(), "box", "good")
	must(t, err)
	plenty := func(string) (int64, error) { return 1 << 40, nil }
	tests := []struct {
		name string
		lim  Limits
		want string
		max  int64 // bytes Stage may write
	}{
		{"within the cap, listed as it is copied", Limits{FreeSpace: plenty}, "gzip", 64 << 20},
		{"over the part cap", Limits{MaxPart: 1 << 30, FreeSpace: plenty}, "HERMES_BOX_SNAPSHOT_MAX_MIB", 1 << 20},
		{"over the free space less the reserve", Limits{FreeSpace: func(string) (int64, error) { return 3 << 30, nil }}, "free", 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sparse"+Suffix)
			gnu(t, "/", nil, "cp", "-a", good, dir)
			must(t, os.Remove(filepath.Join(dir, FileSignature)))
			must(t, os.Truncate(filepath.Join(dir, FileWorkspace), 3<<30))
			state := filepath.Join(t.TempDir(), "state")
			before := written(t)
			_, err := Stage(t.Context(), dir, state, Trust{Key: testSigner.PublicKey(), LegacyOK: true}, tt.lim)
			n := written(t) - before
			t.Logf("%s: wrote %d bytes before refusing: %v", tt.name, n, err)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Stage: %v, want an error saying %q", err, tt.want)
			}
			if n > tt.max {
				t.Errorf("Stage wrote %d bytes before refusing, want at most %d", n, tt.max)
			}
			if left, _ := os.ReadDir(state); len(left) != 0 {
				t.Errorf("a refused stage left %v", left)
			}
		})
	}
}

// TestStageChecksFreeSpaceWhileCopying: the file system filling up while
// a backup is staged stops the copy, leaving nothing.
func TestStageChecksFreeSpaceWhileCopying(t *testing.T) {
	w := newWorld(t)
	w.addMachine(t, "box", "alpha")
	good, err := w.snapshot(t.Context(), "box", "good")
	must(t, err)
	calls := 0
	free := func(string) (int64, error) {
		calls++
		if calls > 1 { // the check before copying passes
			return 1 << 20, nil
		}
		return 1 << 40, nil
	}
	state := filepath.Join(t.TempDir(), "state")
	_, err = Stage(t.Context(), good, state, testTrust, Limits{FreeSpace: free, CheckEvery: 1})
	if !errors.Is(err, ErrNoSpace) || calls < 2 {
		t.Fatalf("Stage: %v after %d free-space checks", err, calls)
	}
	if left, _ := os.ReadDir(state); len(left) != 0 {
		t.Errorf("a refused stage left %v", left)
	}
}
