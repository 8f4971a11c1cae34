package chunkstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadQuarantineRefusesBadLines: a quarantine file that is not
// "<chunk> <pack>" lines is ErrCorrupt naming the file and line.
func TestReadQuarantineRefusesBadLines(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, tt := range []struct{ name, data, line string }{
		{"good", id + " " + id + "\n", ""},
		{"no newline", id + " " + id, "line 1"},
		{"one field", id + "\n" + id + " " + id + "\n", "line 1"},
		{"upper hex", id + " " + id + "\n" + strings.ToUpper(id) + " " + id + "\n", "line 2"},
		{"three fields", id + " " + id + " x\n", "line 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.WriteFile(filepath.Join(dir, quarantineFile), []byte(tt.data), 0o600))
			bad, err := readQuarantine(dir)
			switch {
			case tt.line == "" && (err != nil || len(bad) != 1):
				t.Fatalf("readQuarantine = %v, %v", bad, err)
			case tt.line != "" && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), quarantineFile+" "+tt.line)):
				t.Fatalf("readQuarantine = %v, want ErrCorrupt naming %s", err, tt.line)
			}
		})
	}
}

func FuzzReadQuarantine(f *testing.F) {
	id := strings.Repeat("ab", 32)
	f.Add([]byte(id + " " + id + "\n"))
	f.Add([]byte("x y\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dir, quarantineFile), data, 0o600))
		bad, err := readQuarantine(dir)
		if err == nil && len(bad) > strings.Count(string(data), "\n") {
			t.Fatalf("%d entries from %d lines", len(bad), strings.Count(string(data), "\n"))
		}
	})
}
