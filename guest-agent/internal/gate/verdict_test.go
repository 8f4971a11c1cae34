package gate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// probes counts the probe runs a fakeRunner saw.
func (f *fakeRunner) probes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.cmds {
		if strings.Contains(strings.Join(c.Args, " "), "hermes-box-gate-probe-") {
			n++
		}
	}
	return n
}

// cachedTarget is a 0.19.0 fixture with a verdict cache and the inputs the
// key reads: a config, an .env, a user plugin, the managed config, the
// tree's plugin.
func cachedTarget(t *testing.T) (Target, *fakeRunner) {
	t.Helper()
	run := &fakeRunner{probe: answer(t, intended(pins.GateSmartPlugin))}
	tgt := fixtureTarget(t, "0.19.0", run)
	tgt.Verdicts = verdictsIn(filepath.Join(t.TempDir(), "state"))
	write(t, tgt.Home, "config.yaml", "approvals:\n  mode: smart\n")
	write(t, tgt.Home, ".env", "OPENAI_API_KEY=x\n")
	write(t, tgt.Home, "plugins/mine/plugin.yaml", "name: mine\n")
	write(t, tgt.Managed, "config.yaml", "approvals:\n  mode: smart\n")
	write(t, tgt.Source, PluginDir+"/__init__.py", "# the gate\n")
	return tgt, run
}

func mustProbe(t *testing.T, tgt Target) Effective {
	t.Helper()
	eff, err := probeCached(context.Background(), tgt, release(t, "0.19.0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return eff
}

// probedThen probes a cachedTarget, changes it, and fails unless the
// second answer ran the probe again.
func probedThen(t *testing.T, change func(*testing.T, *Target), why string) (Target, *fakeRunner) {
	t.Helper()
	tgt, run := cachedTarget(t)
	mustProbe(t, tgt)
	change(t, &tgt)
	mustProbe(t, tgt)
	if n := run.probes(); n != 2 {
		t.Fatalf("probe ran %d times, want 2: %s", n, why)
	}
	return tgt, run
}

func TestVerdictCacheHitRunsNoPython(t *testing.T) {
	tgt, run := cachedTarget(t)
	first := mustProbe(t, tgt)
	for range 3 {
		if got := mustProbe(t, tgt); got.Mode != first.Mode || got.Plugin == nil || !got.Plugin.Bundled {
			t.Fatalf("cached verdict %+v, probed %+v", got, first)
		}
	}
	if n := run.probes(); n != 1 {
		t.Fatalf("probe ran %d times for four answers on unchanged inputs, want 1", n)
	}
	// The same contents written anew (a restored or repacked box) keep
	// the verdict.
	for _, f := range []string{"config.yaml", ".env", "plugins/mine/plugin.yaml"} {
		b := read(t, tgt.Home, f)
		remove(t, filepath.Join(tgt.Home, f))
		write(t, tgt.Home, f, b)
	}
	mustProbe(t, tgt)
	if n := run.probes(); n != 1 {
		t.Fatalf("probe ran %d times after the inputs were rewritten unchanged, want 1", n)
	}
	fi, err := os.Stat(tgt.Verdicts.Path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file %v %v, want mode 0600", fi, err)
	}
}

func TestVerdictCacheMissesOnEveryInput(t *testing.T) {
	cases := map[string]func(t *testing.T, tgt *Target){
		"config.yaml":      func(t *testing.T, tgt *Target) { write(t, tgt.Home, "config.yaml", "approvals:\n  mode: off\n") },
		".env":             func(t *testing.T, tgt *Target) { write(t, tgt.Home, ".env", "TERMINAL_ENV=local\n") },
		"user plugin file": func(t *testing.T, tgt *Target) { write(t, tgt.Home, "plugins/mine/__init__.py", "x = 1\n") },
		"user plugin mode": func(t *testing.T, tgt *Target) {
			chmod(t, filepath.Join(tgt.Home, "plugins/mine/plugin.yaml"), 0o755)
		},
		"user plugin removed": func(t *testing.T, tgt *Target) {
			if err := os.RemoveAll(filepath.Join(tgt.Home, "plugins/mine")); err != nil {
				t.Fatal(err)
			}
		},
		".managed stamp":  func(t *testing.T, tgt *Target) { write(t, tgt.Home, ".managed", "") },
		".op.env":         func(t *testing.T, tgt *Target) { write(t, tgt.Home, ".op.env", "OP_SERVICE_ACCOUNT_TOKEN=x\n") },
		"managed config":  func(t *testing.T, tgt *Target) { write(t, tgt.Managed, "config.yaml", "approvals: {}\n") },
		"tree's plugin":   func(t *testing.T, tgt *Target) { write(t, tgt.Source, PluginDir+"/__init__.py", "# other\n") },
		"anchored source": func(t *testing.T, tgt *Target) { alter(t, tgt.Source, approvalPy, "def ") },
		"interpreter":     func(t *testing.T, tgt *Target) { tgt.Python = "/usr/bin/python3" },
		"user":            func(t *testing.T, tgt *Target) { tgt.User = "hermes" },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			tgt, run := probedThen(t, change, "the change did not miss the cache")
			mustProbe(t, tgt)
			if n := run.probes(); n != 2 {
				t.Fatalf("probe ran %d times, want 2: the new state was not cached", n)
			}
		})
	}
}

// TestVerdictCacheHostileInputs: inputs the hermes user controls that
// must neither hang, nor read without bound, nor be cached.
func TestVerdictCacheHostileInputs(t *testing.T) {
	cases := map[string]func(t *testing.T, tgt Target){
		"fifo as config": func(t *testing.T, tgt Target) {
			remove(t, filepath.Join(tgt.Home, "config.yaml"))
			if err := syscall.Mkfifo(filepath.Join(tgt.Home, "config.yaml"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"symlink to /dev/zero": func(t *testing.T, tgt Target) {
			symlink(t, "/dev/zero", filepath.Join(tgt.Home, "plugins/mine/__init__.py"))
		},
		"symlinked plugin dir": func(t *testing.T, tgt Target) {
			symlink(t, t.TempDir(), filepath.Join(tgt.Home, "plugins/other"))
		},
		"huge file": func(t *testing.T, tgt Target) {
			f, err := os.Create(filepath.Join(tgt.Home, ".env"))
			if err == nil {
				err = f.Truncate(keyMaxBytes + 1)
			}
			if err == nil {
				err = f.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, hostile := range cases {
		t.Run(name, func(t *testing.T) {
			tgt, run := cachedTarget(t)
			hostile(t, tgt)
			mustProbe(t, tgt)
			mustProbe(t, tgt)
			if n := run.probes(); n != 2 {
				t.Fatalf("probe ran %d times, want 2: an unkeyable state was cached", n)
			}
			if _, err := os.Lstat(tgt.Verdicts.Path); err == nil {
				t.Fatal("a verdict was stored for an unkeyable state")
			}
		})
	}
}

// TestVerdictCacheDistrustsItsFile: a cache file that is not the agent's
// alone, or answers another key, is ignored (the probe runs).
func TestVerdictCacheDistrustsItsFile(t *testing.T) {
	cases := map[string]func(t *testing.T, tgt *Target){
		"group-writable": func(t *testing.T, tgt *Target) { chmod(t, tgt.Verdicts.Path, 0o620) },
		"world-writable": func(t *testing.T, tgt *Target) { chmod(t, tgt.Verdicts.Path, 0o602) },
		"another owner":  func(t *testing.T, tgt *Target) { tgt.Verdicts.Owner = os.Geteuid() + 1 },
		"a symlink":      func(t *testing.T, tgt *Target) { linkInPlace(t, tgt.Verdicts.Path) },
		"another key": func(t *testing.T, tgt *Target) {
			var rec verdictRecord
			if err := json.Unmarshal([]byte(read(t, filepath.Dir(tgt.Verdicts.Path), filepath.Base(tgt.Verdicts.Path))), &rec); err != nil {
				t.Fatal(err)
			}
			rec.Key = strings.Repeat("0", len(rec.Key))
			b, _ := json.Marshal(rec)
			if err := os.WriteFile(tgt.Verdicts.Path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, tamper := range cases {
		t.Run(name, func(t *testing.T) {
			probedThen(t, tamper, "the distrusted cache file answered")
		})
	}
}

// swapRunner changes config.yaml while the probe runs, as the hermes user
// could between the key and Python's read.
type swapRunner struct {
	*fakeRunner
	home string
}

func (s swapRunner) Run(ctx context.Context, c command.Command) (command.Output, error) {
	if err := os.WriteFile(filepath.Join(s.home, "config.yaml"), []byte("approvals:\n  mode: smart\n"), 0o644); err != nil {
		return command.Output{}, err
	}
	return s.fakeRunner.Run(ctx, c)
}

func TestVerdictCacheKeepsNoAnswerOfAChangingState(t *testing.T) {
	tgt, run := cachedTarget(t)
	tgt.Runner = swapRunner{fakeRunner: run, home: tgt.Home}
	mustProbe(t, tgt)
	if _, err := os.Lstat(tgt.Verdicts.Path); err == nil {
		t.Fatal("the answer of a state that changed during the probe was stored")
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// linkInPlace moves the file at path aside and puts a symlink to it in
// its place.
func linkInPlace(t *testing.T, path string) {
	t.Helper()
	if err := os.Rename(path, path+".real"); err != nil {
		t.Fatal(err)
	}
	symlink(t, path+".real", path)
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
