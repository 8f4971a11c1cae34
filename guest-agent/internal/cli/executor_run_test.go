package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/executor"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
	"github.com/hermes-box/hermes-box/guest-agent/internal/passwd"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
)

// execCall is one recorded executor.Exec.
type execCall struct {
	argv []string
	dir  string
	env  []string
	user string
}

// stubExec records executor.Exec instead of replacing the test process.
func stubExec(t *testing.T) *[]execCall {
	t.Helper()
	var calls []execCall
	orig := executor.Exec
	executor.Exec = func(argv []string, dir string, env []string, u passwd.User) error {
		calls = append(calls, execCall{argv, dir, env, u.Name})
		return nil
	}
	t.Cleanup(func() { executor.Exec = orig })
	return &calls
}

func TestExecutorRunPullsActivatesAndExecs(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	ref := reg.Push(t, "executor/selfhost:v1", ocitest.ExecutorImage(t, runtime.GOARCH, readStandinBun(t)), nil)
	root := accountsRoot(t)
	calls := stubExec(t)
	t.Setenv(boxlayout.EnvExecutorHostPort, "14788")
	runIt := func(image string) (int, string) {
		t.Setenv(boxlayout.EnvExecutorImage, image)
		code, _, errs := run(t, "", "--root", root, "executor", "run", "--registry-ca-dir", reg.CADir())
		return code, errs
	}

	if code, errs := runIt(ref); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	cur, err := (&oci.Store{Root: filepath.Join(root, boxlayout.ExecutorRuntimeDir)}).Current()
	if err != nil || cur == nil || cur.ImageReference != ref {
		t.Fatalf("current %+v (%v), want %s", cur, err, ref)
	}
	data := filepath.Join(root, boxlayout.ExecutorDataDir)
	want := execCall{
		argv: []string{filepath.Join(cur.Dir, "usr/local/bin/bun"), "run", "src/serve.ts"},
		dir:  filepath.Join(cur.Dir, "app/apps/host-selfhost"),
		env: []string{"HOME=/home/hermes", "PATH=/usr/local/bin:/usr/bin:/bin",
			"BUN_FEATURE_FLAG_DISABLE_IPV6=1", "EXECUTOR_HOST=0.0.0.0", "PORT=4788", "EXECUTOR_ALLOW_LOCAL_NETWORK=false", "EXECUTOR_ALLOW_STDIO_MCP=false",
			"EXECUTOR_DATA_DIR=" + data, "EXECUTOR_WEB_BASE_URL=http://localhost:14788", "DO_NOT_TRACK=1", "EXECUTOR_DISABLE_ANALYTICS=1"},
		user: "hermes",
	}
	if len(*calls) != 1 || !sameCall((*calls)[0], want) {
		t.Fatalf("exec %+v\nwant %+v", *calls, want)
	}
	if fi, err := os.Stat(data); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir %v (%v)", fi, err)
	}

	// Relaunch, also under another tag: the active release is used as it is.
	gets := reg.AllBlobGets()
	retagged := strings.Replace(ref, ":v1@", ":v1-renamed@", 1)
	for _, image := range []string{ref, retagged} {
		if code, errs := runIt(image); code != 0 {
			t.Fatalf("relaunch with %s: exit %d: %s", image, code, errs)
		}
	}
	if reg.AllBlobGets() != gets {
		t.Fatalf("a relaunch downloaded blobs (%d → %d)", gets, reg.AllBlobGets())
	}
	if len(*calls) != 3 || !sameCall((*calls)[2], want) {
		t.Fatalf("relaunch exec %+v", (*calls)[len(*calls)-1])
	}

	// A digest the registry does not have: non-zero exit, nothing started,
	// the active release untouched.
	code, errs := runIt(badDigest(ref))
	if code != 1 || !strings.Contains(errs, "executor run: ") || len(*calls) != 3 {
		t.Fatalf("bad digest: exit %d, %d execs: %s", code, len(*calls), errs)
	}
	if after, _ := (&oci.Store{Root: filepath.Join(root, boxlayout.ExecutorRuntimeDir)}).Current(); after == nil || after.Name != cur.Name {
		t.Fatalf("current changed to %+v after a failed pull", after)
	}
}

func sameCall(a, b execCall) bool {
	return slices.Equal(a.argv, b.argv) && a.dir == b.dir && slices.Equal(a.env, b.env) && a.user == b.user
}

func TestExecutorRunRefusals(t *testing.T) {
	calls := stubExec(t)
	d := strings.Repeat("a", 64)
	tests := []struct {
		image, port, want string
	}{
		{"", "4788", "HERMES_BOX_EXECUTOR_IMAGE is not set"},
		{"r.example/x:v1", "4788", "HERMES_BOX_EXECUTOR_IMAGE: image reference"},
		{"r.example/x:v1@sha256:" + d, "", "HERMES_BOX_EXECUTOR_HOST_PORT: want a port"},
		{"r.example/x:v1@sha256:" + d, "70000", "HERMES_BOX_EXECUTOR_HOST_PORT: want a port"},
	}
	for _, tt := range tests {
		t.Setenv(boxlayout.EnvExecutorImage, tt.image)
		t.Setenv(boxlayout.EnvExecutorHostPort, tt.port)
		root := t.TempDir()
		code, _, errs := run(t, "", "--root", root, "executor", "run")
		if code != 2 || !strings.Contains(errs, tt.want) {
			t.Errorf("%q %q: exit %d: %s", tt.image, tt.port, code, errs)
		}
		if ents, _ := os.ReadDir(root); len(ents) != 0 {
			t.Errorf("%q %q: created %v", tt.image, tt.port, ents)
		}
	}
	// Never through the relay: it would replace the relay with bun.
	code, _, errs := run(t, request("executor", "run"), "--root", t.TempDir(), "relay")
	if code != 2 || !strings.Contains(errs, "does not run through the relay") || len(*calls) != 0 {
		t.Fatalf("relayed executor run: exit %d: %s", code, errs)
	}
}

func readStandinBun(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "bun-standin.py"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// badDigest is ref with a digest no image in the registry has.
func badDigest(ref string) string {
	last := ref[len(ref)-1]
	flip := byte('0')
	if last == '0' {
		flip = '1'
	}
	return ref[:len(ref)-1] + string(flip)
}
