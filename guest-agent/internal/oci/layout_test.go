package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/guest-agent/internal/oci/ocitest"
)

// writeTree creates files (path → body; a body "->X" makes a symlink to X,
// a path ending in / a directory) under a new temp dir.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, p := range keys {
		body, full := files[p], filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(p, "/"):
			err = os.MkdirAll(full, 0o755)
		case strings.HasPrefix(body, "->"):
			err = os.Symlink(body[2:], full)
		default:
			err = os.WriteFile(full, []byte(body), 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func workspaceTree() map[string]string {
	return map[string]string{
		"usr/local/bin/bun":                      "#!/bin/sh\n",
		"app/package.json":                       `{"name":"executor-workspace"}`,
		"app/bun.lock":                           "{}",
		"app/apps/host-selfhost/package.json":    `{"name":"@executor-js/host-selfhost","scripts":{"start":"bun run src/serve.ts"}}`,
		"app/apps/host-selfhost/src/serve.ts":    "serve",
		"app/apps/host-selfhost/dist/index.html": "<html>",
	}
}

func packagedTree() map[string]string {
	return map[string]string{
		"usr/local/bin/bun":                           "#!/bin/sh\n",
		"app/apps/host-selfhost/dist-server/serve.js": "serve",
		"app/apps/host-selfhost/dist/index.html":      "<html>",
	}
}

func with(base map[string]string, edits map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range edits {
		if v == "" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

func TestDetectLayoutAndCheckPayload(t *testing.T) {
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"bin/bun", "serve.js"} {
		if err := os.WriteFile(filepath.Join(outside, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		files  map[string]string
		layout Layout
		err    string
	}{
		{"workspace", workspaceTree(), LayoutWorkspace, ""},
		{"packaged", packagedTree(), LayoutPackaged, ""},
		{"both markers", with(workspaceTree(), packagedTree()), "", "ambiguous"},
		{"neither", map[string]string{"usr/local/bin/bun": "x", "app/README": "x"}, "", "neither"},
		{"packaged without the web UI", with(packagedTree(), map[string]string{"app/apps/host-selfhost/dist/index.html": ""}), LayoutPackaged, "dist/index.html is missing"},
		{"packaged entry is a symlink", with(packagedTree(), map[string]string{"app/apps/host-selfhost/dist-server/serve.js": "->/etc/passwd"}), LayoutPackaged, "serve.js is missing, empty or not a regular file"},
		{"workspace without bun.lock", with(workspaceTree(), map[string]string{"app/bun.lock": ""}), LayoutWorkspace, "bun.lock"},
		{"bun through a symlinked usr/local", with(packagedTree(), map[string]string{"usr/local/bin/bun": "", "usr/local": "->" + outside}), LayoutPackaged, "usr/local: is not a real directory"},
		{"bun through a symlinked bin", with(workspaceTree(), map[string]string{"usr/local/bin/bun": "", "usr/local/bin": "->" + filepath.Join(outside, "bin")}), LayoutWorkspace, "usr/local/bin: is not a real directory"},
		{"bun is a symlink", with(packagedTree(), map[string]string{"usr/local/bin/bun": "->" + filepath.Join(outside, "bin", "bun")}), LayoutPackaged, "not an executable regular file"},
		{"entry through a symlinked app dir", with(packagedTree(), map[string]string{
			"app/apps/host-selfhost/dist-server/serve.js": "", "app/apps/host-selfhost/dist-server": "->" + outside,
			"app/apps/host-selfhost/dist-server/": ""}), LayoutPackaged, "dist-server: is not a real directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeTree(t, tt.files)
			l, derr := DetectLayout(dir)
			if tt.layout != "" && (derr != nil || l != tt.layout) {
				t.Fatalf("DetectLayout = %q, %v; want %q", l, derr, tt.layout)
			}
			err := CheckPayload(dir)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("CheckPayload = %v, want %q", err, tt.err)
			}
		})
	}
}

func TestActiveEntryPackaged(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	img := ocitest.PackagedExecutorImage(t, "arm64", readTestdata(t, "fake-bun.sh"))
	ref := push(t, reg, "usefulsoftwareco/executor-selfhost:v1.5.35", img, nil)
	s, _ := newStore(t, reg, "arm64")
	r, err := s.Install(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if r.Layout != LayoutPackaged {
		t.Fatalf("release layout %q", r.Layout)
	}
	got, err := ActiveEntry(s.Root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(r.Dir, "usr/local/bin/bun"), "run", "dist-server/serve.js"}
	if !slices.Equal(got.Command, want) || got.Dir != filepath.Join(r.Dir, "app/apps/host-selfhost") {
		t.Fatalf("got %v in %s, want %v", got.Command, got.Dir, want)
	}
}

// recordingRunner records the validation command and runs it.
type recordingRunner struct {
	mu   sync.Mutex
	cmds []command.Command
}

func (r *recordingRunner) Run(ctx context.Context, c command.Command) (command.Output, error) {
	r.mu.Lock()
	r.cmds = append(r.cmds, c)
	r.mu.Unlock()
	return ExecRunner.Run(ctx, c)
}

func TestValidationBuildsEachLayoutsEntry(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	bun := readTestdata(t, "fake-bun.sh")
	for layout, img := range map[Layout]func() [][]byte{
		LayoutWorkspace: func() [][]byte { return ocitest.ExecutorLayers(t, "arm64", bun) },
		LayoutPackaged:  func() [][]byte { return ocitest.PackagedExecutorLayers(t, "arm64", bun) },
	} {
		t.Run(string(layout), func(t *testing.T) {
			ref := push(t, reg, "executor/selfhost:"+string(layout), ocitest.Image(t, "linux", "arm64", img()), nil)
			s, _ := newStore(t, reg, "arm64")
			rr := &recordingRunner{}
			s.Runner = rr
			r, err := s.Pull(t.Context(), ref)
			if err != nil {
				t.Fatal(err)
			}
			if len(rr.cmds) != 1 {
				t.Fatalf("%d validation commands", len(rr.cmds))
			}
			c := rr.cmds[0]
			// The release dir was a staging dir when validated: compare the tail.
			if !strings.HasSuffix(c.Path, "/usr/local/bin/bun") || c.Args[0] != "build" ||
				!strings.HasSuffix(c.Args[1], "/app/apps/host-selfhost/"+layout.Entry()) {
				t.Fatalf("validation ran %s %v", c.Path, c.Args)
			}
			if r.Layout != layout {
				t.Fatalf("release layout %q, want %q", r.Layout, layout)
			}
		})
	}
}

// TestSwitchBetweenLayoutsIsAtomic activates a workspace-layout release,
// then a packaged one, then the workspace one again, while a reader keeps
// resolving `current`: it always finds one complete release or the other,
// never none and never a half-written one.
func TestSwitchBetweenLayoutsIsAtomic(t *testing.T) {
	reg := ocitest.NewRegistry(t, nil)
	bun := readTestdata(t, "fake-bun.sh")
	old := push(t, reg, "rhyssullivan/executor-selfhost:v1.5.12", ocitest.ExecutorImage(t, "arm64", bun), nil)
	cur := push(t, reg, "usefulsoftwareco/executor-selfhost:v1.5.35", ocitest.PackagedExecutorImage(t, "arm64", bun), nil)
	s, _ := newStore(t, reg, "arm64")
	if _, err := s.Install(t.Context(), old); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var reads atomic.Int64
	seen := map[Layout]*atomic.Int64{LayoutWorkspace: {}, LayoutPackaged: {}}
	fail := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			r, err := s.Current()
			if err == nil && r == nil {
				err = errors.New("current is missing")
			}
			if err == nil {
				var l Layout
				if l, err = checkPayload(r.Dir); err == nil && seen[l] != nil {
					seen[l].Add(1)
				}
			}
			if err != nil {
				fail <- err
				return
			}
			reads.Add(1)
		}
	}()
	for i, ref := range []Reference{cur, old, cur} {
		want := map[bool]Layout{true: LayoutPackaged, false: LayoutWorkspace}[i%2 == 0]
		before := seen[want].Load()
		r, err := s.Install(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Current(); got == nil || got.Name != r.Name || got.Layout != want {
			t.Fatalf("switch %d: current %+v, want %s", i, got, want)
		}
		// Let the reader resolve the new release at least once before the
		// next switch, however the goroutines are scheduled.
		for deadline := time.Now().Add(10 * time.Second); seen[want].Load() == before && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if seen[want].Load() == before {
			t.Fatalf("switch %d: the reader never resolved the %s release", i, want)
		}
	}
	stop.Store(true)
	<-done
	select {
	case err := <-fail:
		t.Fatalf("a reader saw no complete release during a switch: %v", err)
	default:
	}
	if seen[LayoutWorkspace].Load() == 0 || seen[LayoutPackaged].Load() == 0 || reads.Load() < 3 {
		t.Fatalf("the reader saw workspace %d, packaged %d times in %d reads", seen[LayoutWorkspace].Load(), seen[LayoutPackaged].Load(), reads.Load())
	}
}
