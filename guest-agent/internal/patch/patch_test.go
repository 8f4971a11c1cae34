package patch

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermestest"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/pins"
)

func TestEachAnchorApplies(t *testing.T) {
	for _, set := range Sets() {
		dir := fixtureTree(t, v16)
		if set.ID == v19.AnchorSet {
			dir = fixtureTree019(t)
		}
		for _, a := range set.Anchors {
			t.Run(set.ID+"/"+a.Label, func(t *testing.T) {
				src := readFile(t, dir, a.File)
				orig := bytes.Clone(src)
				out, err := a.Apply(src)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(src, orig) {
					t.Fatal("Apply modified its input")
				}
				i := bytes.Index(orig, []byte(a.Text())) + len(a.Before)
				want := string(orig[:i]) + a.Hunk + string(orig[i:])
				if string(out) != want {
					t.Fatalf("hunk not inserted at the anchor:\n%s", out)
				}
				if a.Applied(out) != 1 || a.Applied(orig) != 0 {
					t.Fatalf("marker %q: %d after, %d before", a.Marker, a.Applied(out), a.Applied(orig))
				}
			})
		}
	}
}

func TestMarkersAreUnique(t *testing.T) {
	for _, set := range Sets() {
		for _, a := range set.Anchors {
			for _, b := range set.Anchors {
				if n := strings.Count(b.Hunk, a.Marker); (a.Label == b.Label) != (n == 1) || n > 1 {
					t.Errorf("%s: marker %q occurs %d times in hunk %q", set.ID, a.Marker, n, b.Label)
				}
				if strings.Contains(b.Hunk, a.Text()) {
					t.Errorf("%s: hunk %q contains anchor %q", set.ID, b.Label, a.Label)
				}
			}
		}
	}
}

func TestEverySetIsPinned(t *testing.T) {
	for _, rel := range pins.HermesReleases {
		if _, err := SetByID(rel.AnchorSet); err != nil {
			t.Errorf("pin %s: %v", rel.Version, err)
		}
	}
	if _, err := SetByID("hermes-9.9.9"); err == nil {
		t.Error("unknown set accepted")
	}
}

func TestAnchorDriftRefusedBeforeAnyWrite(t *testing.T) {
	for _, a := range v16Set(t).Anchors {
		for _, tc := range []struct {
			name  string
			edit  func(src, anchor string) string
			count int
		}{
			{"zero", func(src, anchor string) string { return strings.Replace(src, anchor, "", 1) }, 0},
			{"two", func(src, anchor string) string { return src + "\n" + anchor }, 2},
		} {
			t.Run(a.Label+"/"+tc.name, func(t *testing.T) {
				dir := fixtureTree(t, v16)
				writeFile(t, dir, a.File, tc.edit(string(readFile(t, dir, a.File)), a.Text()))
				before := snapshot(t, dir)
				run := &fakeRunner{}
				_, err := (&Patcher{Runner: run}).Patch(context.Background(), dir, v16.Commit)
				var ae *AnchorError
				if !errors.As(err, &ae) || ae.Label != a.Label || ae.File != a.File || ae.Count != tc.count {
					t.Fatalf("got %v, want an anchor error for %q with count %d", err, a.Label, tc.count)
				}
				if !strings.Contains(err.Error(), a.File) || !strings.Contains(err.Error(), a.Label) {
					t.Fatalf("error %q does not name the file and the anchor", err)
				}
				sameSnapshot(t, snapshot(t, dir), before)
				if run.count() != 0 {
					t.Fatal("ran python on a refused tree")
				}
			})
		}
	}
}

func v16Set(t *testing.T) Set {
	s, err := SetByID(v16.AnchorSet)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWrongTreeRefusedBeforeAnyWrite(t *testing.T) {
	other := strings.Repeat("a", 40)
	tests := []struct {
		name, commit, want string
		edit               func(t *testing.T, dir string)
	}{
		{"other commit in HEAD", v16.Commit, "holds Hermes commit " + other, func(t *testing.T, dir string) {
			writeFile(t, dir, ".git/HEAD", other+"\n")
		}},
		{"the 0.17.0 tree asked for 0.16.0", v16.Commit, "holds Hermes commit " + v17.Commit, func(t *testing.T, dir string) {
			writeFile(t, dir, ".git/HEAD", v17.Commit+"\n")
		}},
		{"wrong version", v16.Commit, `version "0.17.0", want "0.16.0"`, func(t *testing.T, dir string) {
			writeFile(t, dir, "pyproject.toml", "[project]\nversion = \"0.17.0\"\n")
		}},
		{"version outside [project]", v16.Commit, "no version in the [project] table", func(t *testing.T, dir string) {
			writeFile(t, dir, "pyproject.toml", "[tool.x]\nversion = \"0.16.0\"\n")
		}},
		{"no pyproject", v16.Commit, "pyproject.toml", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "pyproject.toml"))
		}},
		{"no commit record", v16.Commit, "cannot tell which Hermes commit", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, ".git"))
		}},
		{"marker disagrees with git", v16.Commit, "records " + other, func(t *testing.T, dir string) {
			writeFile(t, dir, SourceMarker, "commit="+other+"\n")
		}},
		{"unpinned commit", other, "unsupported Hermes commit", func(*testing.T, string) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fixtureTree(t, v16)
			tt.edit(t, dir)
			before := snapshot(t, dir)
			_, err := (&Patcher{Runner: &fakeRunner{}}).Patch(context.Background(), dir, tt.commit)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			sameSnapshot(t, snapshot(t, dir), before)
		})
	}
}

func TestPatchThenRerunChangesNothing(t *testing.T) {
	for _, rel := range []pins.HermesRelease{v16, v17} {
		t.Run(rel.Version, func(t *testing.T) {
			dir := fixtureTree(t, rel)
			run := &fakeRunner{}
			p := &Patcher{Runner: run}
			res, err := p.Patch(context.Background(), dir, rel.Commit)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{ModulePath, approvalFile, gatewayFile, auxClientFile, envLoaderFile, pluginsFile, memoryInitFile}
			if rel.ManagedScope {
				want = append(want, managedFile)
			}
			want = append(want, MarkerFile)
			if strings.Join(res.Written, ",") != strings.Join(want, ",") || res.AlreadyPatched || res.Set != rel.AnchorSet {
				t.Fatalf("result %+v", res)
			}
			if !bytes.Equal(readFile(t, dir, ModulePath), Module()) {
				t.Fatal("module not installed")
			}
			if got := string(readFile(t, dir, MarkerFile)); got != "commit="+rel.Commit+"\nanchor_set="+rel.AnchorSet+"\nmodule_sha256="+ModuleSHA256()+"\n" {
				t.Fatalf("marker %q", got)
			}
			if run.count() != 2 || run.cmds[0].Args[1] != "py_compile" || !strings.Contains(strings.Join(run.cmds[1].Args, " "), "unittest") {
				t.Fatalf("commands %+v", run.cmds)
			}
			before := snapshot(t, dir)
			res, err = p.Patch(context.Background(), dir, rel.Commit)
			if err != nil || !res.AlreadyPatched || len(res.Written) != 0 {
				t.Fatalf("rerun: %+v, %v", res, err)
			}
			sameSnapshot(t, snapshot(t, dir), before)
			if run.count() != 2 {
				t.Fatal("rerun ran python")
			}
		})
	}
}

func TestRerunVerifiesThePatchedTree(t *testing.T) {
	tests := []struct {
		name, want string
		edit       func(t *testing.T, dir string)
	}{
		{"module edited", "reviewer module differs", func(t *testing.T, dir string) {
			writeFile(t, dir, ModulePath, "APPROVE_EVERYTHING = True\n")
		}},
		{"marker from another module", "marker is", func(t *testing.T, dir string) {
			writeFile(t, dir, MarkerFile, "commit="+v16.Commit+"\nanchor_set=hermes-0.16.0\nmodule_sha256=00\n")
		}},
		{"hunk removed", "13 of 15 hunks present", func(t *testing.T, dir string) {
			src := string(readFile(t, dir, approvalFile))
			a := v16Set(t).Anchors[0]
			writeFile(t, dir, approvalFile, strings.Replace(strings.Replace(src, v16Set(t).Anchors[1].Hunk, "", 1), a.Hunk, "", 1))
		}},
		{"hunk duplicated", `marker "tool event capture" occurs 2 times`, func(t *testing.T, dir string) {
			writeFile(t, dir, gatewayFile, string(readFile(t, dir, gatewayFile))+v16Set(t).Anchors[4].Hunk)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fixtureTree(t, v16)
			p := &Patcher{Runner: &fakeRunner{}}
			if _, err := p.Patch(context.Background(), dir, v16.Commit); err != nil {
				t.Fatal(err)
			}
			tt.edit(t, dir)
			before := snapshot(t, dir)
			_, err := p.Patch(context.Background(), dir, v16.Commit)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			sameSnapshot(t, snapshot(t, dir), before)
		})
	}
}

// reference is the tree an uninterrupted run produces.
func reference(t *testing.T) map[string]string {
	dir := fixtureTree(t, v16)
	if _, err := (&Patcher{Runner: &fakeRunner{}}).Patch(context.Background(), dir, v16.Commit); err != nil {
		t.Fatal(err)
	}
	return snapshot(t, dir)
}

func TestInterruptedRunIsNeverMarkedAndCompletes(t *testing.T) {
	want := reference(t)
	injected := errors.New("injected crash")
	// Fail at each write in turn (module, three files, marker), and in the
	// regression suite.
	for failAt := 1; failAt <= 6; failAt++ {
		t.Run(string(rune('0'+failAt)), func(t *testing.T) {
			dir := fixtureTree(t, v16)
			writes := 0
			run := &fakeRunner{}
			p := &Patcher{Runner: run, writeFile: func(path string, data []byte, like fs.FileInfo) error {
				writes++
				if writes == failAt {
					return injected
				}
				return atomicfile.WriteLike(path, data, like, 0o644)
			}}
			if failAt == 6 {
				run.err = injected
			}
			if _, err := p.Patch(context.Background(), dir, v16.Commit); !errors.Is(err, injected) {
				t.Fatalf("got %v, want the injected failure", err)
			}
			if _, err := os.Stat(filepath.Join(dir, MarkerFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("interrupted tree is marked: %v", err)
			}
			for _, f := range v16Set(t).Files() {
				if _, err := fileState(f, readFile(t, dir, f), v16Set(t).For(f)); err != nil {
					t.Fatalf("half-patched file: %v", err)
				}
			}
			if _, err := (&Patcher{Runner: &fakeRunner{}}).Patch(context.Background(), dir, v16.Commit); err != nil {
				t.Fatalf("re-run: %v", err)
			}
			sameSnapshot(t, snapshot(t, dir), want)
		})
	}
}

func TestPatchWithRealPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is required in CI")
		}
		t.Skip("python3 not installed")
	}
	dir := fixtureTree(t, v17)
	if _, err := (&Patcher{Python: python}).Patch(t.Context(), dir, v17.Commit); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tools", "__pycache__")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("byte code was written into the tree")
	}
	// A hunk that breaks the Python is caught before the marker.
	dir = fixtureTree(t, v17)
	writeFile(t, dir, auxClientFile, strings.Replace(string(readFile(t, dir, auxClientFile)), "return resp_kwargs", "return resp_kwargs)", 1))
	_, err = (&Patcher{Python: python}).Patch(t.Context(), dir, v17.Commit)
	if err == nil || !strings.Contains(err.Error(), "byte-compiling") {
		t.Fatalf("got %v, want a byte-compile failure", err)
	}
	if _, err := os.Stat(filepath.Join(dir, MarkerFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a tree that does not compile was marked")
	}
}

// TestPatch019EditsApprovalAndServiceTier: the 0.19.0 set has no reviewer
// module and no suite (the gate plugin carries the reviewer there); it edits
// the container shortcut and the service tier.
func TestPatch019EditsApprovalAndServiceTier(t *testing.T) {
	dir := fixtureTree019(t)
	run := &fakeRunner{}
	res, err := (&Patcher{Runner: run}).Patch(context.Background(), dir, v19.Commit)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{approvalFile, auxClientFile, envLoaderFile, pluginsFile, memoryInitFile, managedFile, MarkerFile}
	if strings.Join(res.Written, ",") != strings.Join(want, ",") || res.Set != "hermes-0.19.0" {
		t.Fatalf("wrote %v with %s", res.Written, res.Set)
	}
	if run.count() != 1 || run.cmds[0].Args[1] != "py_compile" {
		t.Fatalf("ran %+v", run.cmds)
	}
	if _, err := os.Stat(filepath.Join(dir, ModulePath)); err == nil {
		t.Fatal("reviewer module installed")
	}
	if res, err := (&Patcher{Runner: run}).Patch(context.Background(), dir, v19.Commit); err != nil || !res.AlreadyPatched {
		t.Fatalf("re-run: %+v %v", res, err)
	}
}

// TestEnvSwitchEditsRealTrees patches the files of the real 0.16.0, 0.17.0
// and 0.19.0 trees (HERMES_BOX_HERMES_TREES): the edits that keep the
// agent's .env from lifting the gate (HERMES_YOLO_MODE, a container backend
// in TERMINAL_ENV) and the ones that deny in a headless run (no
// HERMES_INTERACTIVE, as `hermes -z` starts) apply there, and the re-run that
// verifies a marked tree (as the gate's health check does) refuses it once
// any one of them is reverted or keeps its marker but loses its assignment.
func TestEnvSwitchEditsRealTrees(t *testing.T) {
	assignments := map[string]string{
		"hermes-box:gate-no-yolo":             "_YOLO_MODE_FROZEN = False",
		"hermes-box:gate-container-guards":    `env_type = "local"`,
		"hermes-box:gate-container-dangerous": `env_type = "local"`,
		"hermes-box:gate-container-execute":   `env_type = "local"`,
		"hermes-box:gate-headless-guards":     `"approved": False,`,
		// One of each pair per release (0.19.0 tells the CLI by its context
		// flag and has the dangerous-command check's own fail-closed flag).
		"hermes-box:gate-headless-execute-env":   `"approved": False,`,
		"hermes-box:gate-headless-execute-ctx":   `"approved": False,`,
		"hermes-box:gate-headless-dangerous-env": `"approved": False,`,
		"hermes-box:gate-headless-dangerous-ctx": "fail_closed_when_no_human=True,",
	}
	for _, rel := range []pins.HermesRelease{v16, v17, v19} {
		t.Run(rel.Version, func(t *testing.T) {
			real := hermestest.RealTree(t, rel.Version)
			if got := strings.TrimSpace(hermestest.ReadFile(t, real, ".commit")); got != rel.Commit {
				t.Fatalf("the real %s tree holds %s, shared/pins pins %s", rel.Version, got, rel.Commit)
			}
			set, err := SetByID(rel.AnchorSet)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for _, f := range append([]string{"pyproject.toml"}, set.Files()...) {
				writeFile(t, dir, f, hermestest.ReadFile(t, real, f))
			}
			writeFile(t, dir, ".git/HEAD", rel.Commit+"\n")
			p := &Patcher{Runner: &fakeRunner{}}
			if _, err := p.Patch(t.Context(), dir, rel.Commit); err != nil {
				t.Fatal(err)
			}
			patched := string(readFile(t, dir, approvalFile))
			edits := 0
			for _, a := range set.For(approvalFile) {
				assignment, ok := assignments[a.Marker]
				if !ok {
					continue
				}
				edits++
				if strings.Count(patched, a.PatchedText()) != 1 {
					t.Fatalf("%s: not applied", a.Label)
				}
				dropped := a.Before + strings.Replace(a.Hunk, assignment, "", 1) + a.After
				for name, text := range map[string]string{"reverted": a.Text(), "assignment dropped": dropped} {
					writeFile(t, dir, approvalFile, strings.Replace(patched, a.PatchedText(), text, 1))
					if _, err := p.Patch(t.Context(), dir, rel.Commit); err == nil || !strings.Contains(err.Error(), approvalFile) {
						t.Errorf("%s %s: re-run gave %v, want a refusal naming %s", a.Label, name, err, approvalFile)
					}
				}
				writeFile(t, dir, approvalFile, patched)
			}
			if edits != len(assignments)-2 {
				t.Fatalf("%d of the %d edits in %s", edits, len(assignments)-2, rel.AnchorSet)
			}
			if _, err := p.Patch(t.Context(), dir, rel.Commit); err != nil {
				t.Fatalf("restored tree refused: %v", err)
			}
		})
	}
}
