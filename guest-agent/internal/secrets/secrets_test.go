package secrets

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// tricky values survive the root file and the shell copy unchanged.
var tricky = map[string]string{
	"OPENAI_API_KEY": "sk-it's \"quoted\" $HOME `id` \\n;|&",
	"MULTI":          "line one\nline two\n",
	"PLAIN":          "v",
}

func TestWriteAndLoad(t *testing.T) {
	root := t.TempDir()
	me := passwd.User{Name: "hermes", UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if err := Write(root, protocol.Secrets{Env: tricky}, me); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{
		{boxlayout.SecretsDir, 0o711 | os.ModeDir}, {filepath.Dir(RootFile), 0o700 | os.ModeDir}, {RootFile, 0o600},
		{filepath.Dir(UserFile), 0o700 | os.ModeDir}, {UserFile, 0o400}, {boxlayout.SecretsProfile, 0o644},
	} {
		info, err := os.Lstat(filepath.Join(root, c.path))
		if err != nil || info.Mode() != c.mode {
			t.Errorf("%s: mode %v (%v), want %v", c.path, info.Mode(), err, c.mode)
			continue
		}
		if st := info.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
			t.Errorf("%s: owner %d", c.path, st.Uid)
		}
	}
	got, err := Load(filepath.Join(root, RootFile))
	want := []string{"MULTI=" + tricky["MULTI"], "OPENAI_API_KEY=" + tricky["OPENAI_API_KEY"], "PLAIN=v"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %q, %v", got, err)
	}
	if got, err := Load(filepath.Join(root, "missing")); got != nil || err != nil {
		t.Errorf("missing file: %q %v", got, err)
	}
	// The shell copy, sourced by sh, gives back every value byte for byte.
	for k, v := range tricky {
		out, err := exec.Command("sh", "-c", `. "$1" && printf %s "$`+k+`"`, "sh", filepath.Join(root, UserFile)).Output()
		if err != nil || string(out) != v {
			t.Errorf("sourced %s = %q (%v), want %q", k, out, err, v)
		}
	}
	profile, _ := os.ReadFile(filepath.Join(root, boxlayout.SecretsProfile))
	if !strings.Contains(string(profile), ". "+UserFile+"\n") {
		t.Errorf("profile snippet does not source %s:\n%s", UserFile, profile)
	}
	// A second write replaces, never appends.
	if err := Write(root, protocol.Secrets{Env: map[string]string{"PLAIN": "w"}}, me); err != nil {
		t.Fatal(err)
	}
	if got, _ := Load(filepath.Join(root, RootFile)); !reflect.DeepEqual(got, []string{"PLAIN=w"}) {
		t.Errorf("after rewrite: %q", got)
	}
}

func TestWriteRefusesBadNames(t *testing.T) {
	me := passwd.User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	for _, env := range []map[string]string{
		{"PATH": "/evil"}, {"LD_PRELOAD": "/x.so"}, {"HERMES_BOX_X": "1"}, {"A-B": "1"}, {"A": ""}, {"A": "a\x00b"},
	} {
		root := t.TempDir()
		err := Write(root, protocol.Secrets{Env: env}, me)
		if err == nil {
			t.Errorf("%q accepted", env)
		}
		for _, v := range env {
			if v != "" && err != nil && strings.Contains(err.Error(), v) {
				t.Errorf("error repeats the value: %v", err)
			}
		}
		if _, serr := os.Stat(filepath.Join(root, RootFile)); serr == nil {
			t.Errorf("%q: a file was written", env)
		}
	}
}
