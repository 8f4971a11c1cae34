package oci

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/command"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Release metadata files, written into each release directory.
const (
	metaImageReference   = ".image-reference"
	metaRepositoryDigest = ".repository-digest"
	metaManifestDigest   = ".manifest-digest"
)

// DefaultLockTimeout is how long a launcher waits for another one.
const DefaultLockTimeout = 55 * time.Minute

// Store manages the releases under one runtime root.
type Store struct {
	// Root is the runtime root (boxlayout.ExecutorRuntimeDir in the box).
	Root string
	// PullOptions tune image pulls.
	PullOptions PullOptions
	// Runner runs the validation build; nil means ExecRunner.
	Runner command.Runner
	// RunAs, when set, runs the validation build as that user.
	RunAs *syscall.Credential
	// UID and GID own unpacked files; -1 means the agent's own ids.
	UID, GID int
	// LockTimeout bounds the wait for another launcher; 0 means the default.
	LockTimeout time.Duration
}

// Release is one extracted, validated image.
type Release struct {
	// Name is the manifest digest's hex, the directory name.
	Name string `json:"name"`
	// Dir is the release directory.
	Dir              string `json:"dir"`
	ImageReference   string `json:"imageReference"`
	RepositoryDigest string `json:"repositoryDigest"`
	ManifestDigest   string `json:"manifestDigest"`
	// Layout is the layout the release holds ("" when it holds neither).
	Layout Layout `json:"layout,omitempty"`
}

func (s *Store) releasesDir() string { return filepath.Join(s.Root, "releases") }
func (s *Store) currentLink() string { return filepath.Join(s.Root, "current") }

// lock takes launcher.lock, then reaps what dead launchers left behind.
func (s *Store) lock(ctx context.Context) (*Lock, error) {
	if err := os.MkdirAll(s.releasesDir(), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", s.releasesDir(), err)
	}
	timeout := s.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l, err := AcquireLock(lctx, filepath.Join(s.Root, "launcher.lock"))
	if err != nil {
		return nil, err
	}
	if err := s.reap(); err != nil {
		_ = l.Release()
		return nil, err
	}
	return l, nil
}

// reap removes temporaries; only called with the lock held, so every one
// of them belongs to a launcher that is gone.
func (s *Store) reap() error {
	for _, g := range []struct{ dir, pattern string }{
		{s.Root, ".pull-config-*"},
		{s.Root, ".validation-*"},
		{s.Root, ".current-*"},
		{s.releasesDir(), ".staging-*"},
		{s.releasesDir(), ".obsolete-*"},
		{s.Root, ".oci-cache-*/oci-put-blob*"},
	} {
		if err := removeGlob(g.dir, g.pattern); err != nil {
			return err
		}
	}
	return nil
}

// Pull makes sure a validated release of ref exists and returns it. A
// release with the same repository digest is reused, whatever its tag.
func (s *Store) Pull(ctx context.Context, ref Reference) (*Release, error) {
	l, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Release() //nolint:errcheck // the lock goes with the file
	return s.ensure(ctx, ref)
}

// Install pulls ref if needed and activates it, under one lock.
func (s *Store) Install(ctx context.Context, ref Reference) (*Release, error) {
	l, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Release() //nolint:errcheck // the lock goes with the file
	r, err := s.ensure(ctx, ref)
	if err != nil {
		return nil, err
	}
	return r, s.activate(ctx, r, ref)
}

func (s *Store) ensure(ctx context.Context, ref Reference) (*Release, error) {
	if r := s.findUsable(ref); r != nil {
		s.emit(protocol.LevelInfo, "release "+r.Name+" already holds "+ref.Canonical())
		return r, nil
	}
	cache := filepath.Join(s.Root, ".oci-cache-"+ref.DigestHex())
	img, err := Pull(ctx, ref, cache, s.PullOptions)
	if err != nil {
		return nil, err
	}
	r, err := s.install(ctx, ref, img)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(cache); err != nil {
		return nil, fmt.Errorf("removing blob cache: %w", err)
	}
	return r, nil
}

// install extracts img into a staging directory, checks and validates it,
// and renames it to releases/<manifest hex>.
func (s *Store) install(ctx context.Context, ref Reference, img *Image) (*Release, error) {
	name, err := parseDigest(img.ManifestDigest)
	if err != nil {
		return nil, err
	}
	final := filepath.Join(s.releasesDir(), name)
	if r, err := s.load(name); err == nil && r.RepositoryDigest == ref.Canonical() && CheckPayload(final) == nil {
		return r, nil
	}
	staging, err := os.MkdirTemp(s.releasesDir(), ".staging-")
	if err != nil {
		return nil, fmt.Errorf("creating staging dir: %w", err)
	}
	defer os.RemoveAll(staging)
	s.emit(protocol.LevelInfo, "extracting "+img.ManifestDigest)
	if err := Extract(ctx, img.LayoutDir, img.Manifest.Layers, staging, ExtractOptions{UID: s.UID, GID: s.GID}); err != nil {
		return nil, fmt.Errorf("extracting %s: %w", ref, err)
	}
	if err := CheckPayload(staging); err != nil {
		return nil, err
	}
	if err := writeMeta(staging, ref.String(), ref.Canonical(), img.ManifestDigest); err != nil {
		return nil, err
	}
	if err := os.Chmod(staging, 0o755); err != nil {
		return nil, fmt.Errorf("setting mode of %s: %w", staging, err)
	}
	s.emit(protocol.LevelInfo, "validating "+img.ManifestDigest)
	if err := validateRelease(ctx, s.runner(), s.Root, staging, s.RunAs); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(final); err == nil {
		aside, err := os.MkdirTemp(s.releasesDir(), ".obsolete-")
		if err != nil {
			return nil, fmt.Errorf("moving broken %s aside: %w", final, err)
		}
		if err := os.Rename(final, filepath.Join(aside, name)); err != nil {
			return nil, fmt.Errorf("moving broken %s aside: %w", final, err)
		}
		defer os.RemoveAll(aside)
	}
	if err := os.Rename(staging, final); err != nil {
		return nil, fmt.Errorf("installing release %s: %w", name, err)
	}
	if err := atomicfile.SyncDir(s.releasesDir()); err != nil {
		return nil, err
	}
	return s.load(name)
}

func (s *Store) runner() command.Runner {
	if s.Runner == nil {
		return ExecRunner
	}
	return s.Runner
}

func (s *Store) emit(level protocol.Level, msg string) {
	if s.PullOptions.Events != nil {
		_ = s.PullOptions.Events.Emit(protocol.Event{Type: protocol.EventLog, Level: level, Step: "executor", Message: msg})
	}
}

func writeMeta(dir, imageRef, repoDigest, manifestDigest string) error {
	for _, m := range []struct{ name, value string }{
		{metaImageReference, imageRef},
		{metaRepositoryDigest, repoDigest},
		{metaManifestDigest, manifestDigest},
	} {
		if err := atomicfile.Write(filepath.Join(dir, m.name), []byte(m.value+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// load reads a release's metadata and checks it names the directory.
func (s *Store) load(name string) (*Release, error) {
	dir := filepath.Join(s.releasesDir(), name)
	r := &Release{Name: name, Dir: dir}
	for _, m := range []struct {
		name string
		dst  *string
	}{
		{metaImageReference, &r.ImageReference},
		{metaRepositoryDigest, &r.RepositoryDigest},
		{metaManifestDigest, &r.ManifestDigest},
	} {
		b, err := os.ReadFile(filepath.Join(dir, m.name))
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", name, err)
		}
		*m.dst = strings.TrimSpace(string(b))
	}
	if r.ManifestDigest != "sha256:"+name {
		return nil, fmt.Errorf("release %s: %s says %q", name, metaManifestDigest, r.ManifestDigest)
	}
	r.Layout, _ = DetectLayout(dir)
	return r, nil
}

// findUsable returns a release holding ref's content, if one is complete.
func (s *Store) findUsable(ref Reference) *Release {
	rs, _ := s.Releases()
	for i := range rs {
		if rs[i].RepositoryDigest == ref.Canonical() && CheckPayload(rs[i].Dir) == nil {
			return &rs[i]
		}
	}
	return nil
}

// Releases lists the releases whose metadata is intact.
func (s *Store) Releases() ([]Release, error) {
	ents, err := os.ReadDir(s.releasesDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing releases: %w", err)
	}
	var out []Release
	for _, e := range ents {
		if !e.IsDir() || !isDigestHex(e.Name()) {
			continue
		}
		if r, err := s.load(e.Name()); err == nil {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Current returns the active release, or nil when there is none.
func (s *Store) Current() (*Release, error) {
	target, err := os.Readlink(s.currentLink())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.currentLink(), err)
	}
	name, ok := strings.CutPrefix(target, "releases/")
	if !ok || !isDigestHex(name) {
		return nil, fmt.Errorf("%s points to %q, not to releases/<digest>", s.currentLink(), target)
	}
	return s.load(name)
}
