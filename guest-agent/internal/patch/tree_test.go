package patch

import (
	"strings"
	"testing"
)

func TestTreeCommit(t *testing.T) {
	c := v16.Commit
	tests := []struct {
		name  string
		files map[string]string
		want  string // commit, or "error: substring"
	}{
		{"detached HEAD", map[string]string{".git/HEAD": c + "\n"}, c},
		{"loose ref", map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/refs/heads/main": c + "\n"}, c},
		{"packed ref", map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/packed-refs": "# pack-refs with: peeled\n" + c + " refs/heads/main\n"}, c},
		{"gitdir file", map[string]string{".git": "gitdir: elsewhere\n", "elsewhere/HEAD": c + "\n"}, c},
		{"source marker", map[string]string{SourceMarker: "commit=" + c + "\n"}, c},
		{"both agree", map[string]string{".git/HEAD": c + "\n", SourceMarker: "commit=" + c + "\n"}, c},
		{"dangling ref", map[string]string{".git/HEAD": "ref: refs/heads/gone\n"}, "error: neither a loose nor a packed ref"},
		{"garbage HEAD", map[string]string{".git/HEAD": "hello\n"}, "error: unrecognised content"},
		{"escaping ref", map[string]string{".git/HEAD": "ref: refs/../../x\n"}, "error: unrecognised content"},
		{"short marker", map[string]string{SourceMarker: "commit=81eaedd0\n"}, "error: want one line commit="},
		{"nothing", nil, "error: cannot tell"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				writeFile(t, dir, name, content)
			}
			got, err := TreeCommit(dir)
			if want, isErr := strings.CutPrefix(tt.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %q, %v; want error %q", got, err, want)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
}

func TestWriteSourceMarker(t *testing.T) {
	dir := t.TempDir()
	if err := WriteSourceMarker(dir, "nope"); err == nil {
		t.Fatal("short commit accepted")
	}
	if err := WriteSourceMarker(dir, v17.Commit); err != nil {
		t.Fatal(err)
	}
	if got, err := TreeCommit(dir); err != nil || got != v17.Commit {
		t.Fatalf("got %q, %v", got, err)
	}
}
