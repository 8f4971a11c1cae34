package supervise

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRotator(t *testing.T) {
	tests := []struct {
		name    string
		max     int64
		backups int
		writes  []string
		want    map[string]string // file suffix → content
	}{
		{"below limit", 10, 2, []string{"ab\n", "cd\n"}, map[string]string{"": "ab\ncd\n"}},
		{"rotates on a line", 6, 2, []string{"ab\ncd\nef\n"}, map[string]string{"": "ef\n", ".1": "ab\ncd\n"}},
		{"keeps only the backups", 3, 2, []string{"1\n", "2\n", "3\n", "4\n"}, map[string]string{"": "4\n", ".1": "3\n", ".2": "2\n", ".3": ""}},
		{"long line is cut at the limit", 4, 1, []string{"abcdefgh"}, map[string]string{"": "efgh", ".1": "abcd"}},
		{"no backups truncates", 4, 0, []string{"abc\n", "def\n"}, map[string]string{"": "def\n", ".1": ""}},
		{"no limit", 0, 1, []string{strings.Repeat("x", 100)}, map[string]string{"": strings.Repeat("x", 100)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			r, err := openRotator(Log{Path: path, MaxBytes: tt.max, Backups: tt.backups})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.writes {
				if n, err := r.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("write %q: %d, %v", w, n, err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			for suffix, want := range tt.want {
				got, _ := os.ReadFile(path + suffix)
				if string(got) != want {
					t.Errorf("log%s = %q, want %q", suffix, got, want)
				}
			}
			if _, err := r.Write([]byte("x")); err == nil {
				t.Error("write after close succeeded")
			}
		})
	}
}

func TestRotatorAppendsToExistingLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := openRotator(Log{Path: path, MaxBytes: 6, Backups: 1})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(r, "new\n")
	r.Close()
	if b, _ := os.ReadFile(path + ".1"); string(b) != "old\n" {
		t.Fatalf("backup %q: the existing size was not counted", b)
	}
}
