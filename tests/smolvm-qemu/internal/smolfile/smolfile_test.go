package smolfile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseTheRepositorySmolfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "Smolfile"))
	if err != nil {
		t.Fatal(err)
	}
	sf, err := Parse("Smolfile", data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sf.Entrypoint, []string{"/usr/local/sbin/hermes-box-agent"}) || !reflect.DeepEqual(sf.Cmd, []string{"boot"}) {
		t.Fatalf("entrypoint %q cmd %q", sf.Entrypoint, sf.Cmd)
	}
	if sf.CPUs != 4 || sf.Memory != 8192 || sf.Storage != 15 || sf.Overlay != 6 {
		t.Fatalf("resources %+v", sf)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     *Smolfile
		err      string
	}{
		{"arrays and comments", "entrypoint = [\"/bin/a\", 'b # c', ] # comment\ncmd = [\n  \"x\",\n  \"y\"\n]\n",
			&Smolfile{Entrypoint: []string{"/bin/a", "b # c"}, Cmd: []string{"x", "y"}}, ""},
		{"artifact overrides", "cpus = 2\n[pack]\ncpus = 3\nentrypoint = [\"e\"]\n", &Smolfile{CPUs: 3, Entrypoint: []string{"e"}}, ""},
		{"escapes", `workdir = "/a\"b\\c"`, &Smolfile{Workdir: `/a"b\c`}, ""},
		{"ignored known table", "[health]\nexec = [\"true\"]\nretries = 3\n", &Smolfile{}, ""},
		{"unknown key", "cpus = 1\nbogus = 2\n", nil, "Smolfile:2: unknown field `bogus`"},
		{"unknown key in table", "[artifact]\nimage = \"x\"\n", nil, "unknown field `image` in [artifact]"},
		{"unknown table", "[nope]\n", nil, "Smolfile:1: unknown table [nope]"},
		{"duplicate", "cpus = 1\ncpus = 2\n", nil, "Smolfile:2: duplicate key `cpus`"},
		{"bad int", "memory = lots\n", nil, "Smolfile:1: memory: expected a non-negative integer"},
		{"bad bool", "net = yes\n", nil, "net: expected true or false"},
		{"not an array", "cmd = \"boot\"\n", nil, "cmd: expected an array of strings"},
		{"unterminated", "image = \"ubuntu\n", nil, "unterminated string"},
		{"inline table", "[secrets]\nK = { from_env = \"H\" }\n", nil, "unknown field `K` in [secrets]"},
		{"no equals", "cpus\n", nil, "expected key = value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("Smolfile", []byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("entrypoint = [\"/a\"]\ncmd = ['b']\n[artifact]\ncpus = 2\n"))
	f.Add([]byte("image = \"x\\\"y\" # c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := Parse("Smolfile", data)
		if err == nil && sf == nil {
			t.Fatal("nil Smolfile without an error")
		}
		if err != nil && !strings.HasPrefix(err.Error(), "Smolfile:") {
			t.Fatalf("error without file and line: %v", err)
		}
	})
}
