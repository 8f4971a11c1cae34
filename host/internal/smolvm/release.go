package smolvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// Environment variables the driver sets on smolvm calls.
const (
	// EgressFloorEnv selects smolvm's egress floor; "strict" denies the
	// LAN, loopback, link-local, unique-local and CGNAT ranges (the host's
	// loopback alias 100.96.0.1 included), which 1.0.4 denies by default.
	EgressFloorEnv = "SMOLVM_EGRESS_FLOOR"
	// EgressFloorStrict is its value.
	EgressFloorStrict = "strict"
)

// SharedPackPointer is the file smolvm leaves in a machine's data dir when
// create --from used the shared extraction store; it holds the shared
// copy's absolute path.
const SharedPackPointer = ".pack-shared"

// ExtractedMarker is written by smolvm when a pack's layers are extracted.
const ExtractedMarker = ".smolvm-extracted"

// release is the detected smolvm release, found once per Driver.
type release struct {
	mu sync.Mutex
	// qualifying admits a release newer than the table (hermes-box
	// doctor's run) and ignores an earlier doctor verdict.
	qualifying bool
	rel        *pins.SmolvmRelease
	unlisted   bool
	notice     func(string)
}

// Qualifying lets the driver drive a smolvm release newer than every row
// of the pins table as pins.SmolvmBeyond's row, for `hermes-box doctor`
// to qualify it; an earlier doctor verdict on the binary is not applied.
func (d *Driver) Qualifying() {
	d.rel.mu.Lock()
	defer d.rel.mu.Unlock()
	d.rel.qualifying = true
}

// OnNotice sets where the driver says that it accepted a release outside
// the table because hermes-box doctor qualified that binary.
func (d *Driver) OnNotice(fn func(string)) { d.rel.notice = fn }

// Release returns the table row of the smolvm on PATH, running
// `smolvm --version` the first time, and on the first drive of a binary
// checks its flags (checkFlags). A release outside the table is an error
// wrapping pins.ErrUnsupportedSmolvm that shows the table and the install
// command, unless hermes-box doctor passed on this very binary (then it is
// accepted with a notice naming the run); a binary doctor failed on is
// refused naming the failing rows.
func (d *Driver) Release(ctx context.Context) (pins.SmolvmRelease, error) {
	d.rel.mu.Lock()
	defer d.rel.mu.Unlock()
	if d.rel.rel != nil {
		return *d.rel.rel, nil
	}
	v, err := d.Version(ctx)
	if err != nil {
		return pins.SmolvmRelease{}, err
	}
	bin, rec, err := d.record(v)
	if err != nil {
		return pins.SmolvmRelease{}, err
	}
	if rec.Doctor != nil && !rec.Doctor.Passed && !d.rel.qualifying {
		return pins.SmolvmRelease{}, fmt.Errorf("%w: hermes-box doctor (run %s) found smolvm %s at %s failing: %s; install a release that passes (%s), then run hermes-box doctor again",
			ErrDoctorFailed, rec.Doctor.Run, v, bin.Path, strings.Join(rec.Doctor.Failed, ", "), pins.SmolvmInstallCommand(pins.SmolvmRecommended))
	}
	qualified := rec.Doctor != nil && rec.Doctor.Passed
	r, unlisted, err := pins.Smolvm(v, d.rel.qualifying || qualified)
	if err != nil {
		return pins.SmolvmRelease{}, fmt.Errorf("smolvm: %w", err)
	}
	if rec.FlagsChecked.IsZero() && d.bins != nil {
		if err := d.checkFlags(ctx, v, r); err != nil {
			return pins.SmolvmRelease{}, fmt.Errorf("smolvm %s at %s cannot be driven: %w", v, bin.Path, err)
		}
		rec.Binary, rec.Version, rec.FlagsChecked = bin, v, time.Now().UTC()
		if err := d.bins.put(rec); err != nil {
			return pins.SmolvmRelease{}, fmt.Errorf("recording the checked smolvm binary: %w", err)
		}
	}
	if unlisted && qualified && !d.rel.qualifying && d.rel.notice != nil {
		d.rel.notice(fmt.Sprintf("smolvm %s is outside the table of supported releases (%s); accepted for %s (sha256 %s…) because hermes-box doctor passed on it (run %s)",
			v, pins.SmolvmTableVersions(), bin.Path, bin.SHA256[:12], rec.Doctor.Run))
	}
	d.rel.rel, d.rel.unlisted = &r, unlisted
	return r, nil
}

// ErrDoctorFailed is wrapped when hermes-box doctor failed on the binary.
var ErrDoctorFailed = errors.New("smolvm failed hermes-box doctor")

// RememberIn has the driver check each smolvm executable it first drives
// (checkFlags) and remember it in bins, by path and content hash, with
// hermes-box doctor's verdict on it.
func (d *Driver) RememberIn(bins *Binaries) { d.bins = bins }

// record returns the smolvm executable and what is remembered of it for
// version (an empty record when nothing is, or when bins is not set).
func (d *Driver) record(version string) (Binary, BinaryRecord, error) {
	if d.bins == nil {
		return Binary{}, BinaryRecord{}, nil
	}
	bin, err := d.bins.current()
	if err != nil {
		return Binary{}, BinaryRecord{}, err
	}
	rec, ok, err := d.bins.lookup(bin)
	if err != nil {
		return bin, BinaryRecord{}, fmt.Errorf("reading the record of checked smolvm binaries: %w", err)
	}
	if !ok || rec.Version != version {
		return bin, BinaryRecord{}, nil
	}
	return bin, rec, nil
}

// RecordDoctor remembers a doctor run's verdict on the smolvm executable
// the driver runs.
func (d *Driver) RecordDoctor(run DoctorRun) error {
	if d.bins == nil {
		return errors.New("no record of smolvm binaries to write to")
	}
	d.rel.mu.Lock()
	defer d.rel.mu.Unlock()
	if d.rel.rel == nil {
		return errors.New("the smolvm release is not known yet")
	}
	bin, rec, err := d.record(d.rel.rel.Version)
	if err != nil {
		return err
	}
	rec.Binary, rec.Version, rec.Doctor = bin, d.rel.rel.Version, &run
	return d.bins.put(rec)
}

// Unlisted says whether the detected release is outside the table
// (qualifying, or qualified by doctor); false before Release.
func (d *Driver) Unlisted() bool {
	d.rel.mu.Lock()
	defer d.rel.mu.Unlock()
	return d.rel.rel != nil && d.rel.unlisted
}

// bootEnv is the environment of a call that can boot a machine (`machine
// start`, and `pack create --from-vm`, which boots a networked helper):
// the strict egress floor where the release has the variable, so no
// release exposes more of the LAN or the host than 1.0.4, and on Linux the
// VMM's seccomp and Landlock confinement (confineEnv).
func (d *Driver) bootEnv(ctx context.Context) ([]string, error) {
	r, err := d.Release(ctx)
	if err != nil {
		return nil, err
	}
	env, err := d.confineEnv(r)
	if err != nil {
		return nil, err
	}
	if r.EgressFloorVar {
		env = append(env, EgressFloorEnv+"="+EgressFloorStrict)
	}
	return env, nil
}

// sharedDirName is the shared store's directory name: the pack's CRC32 in
// eight lowercase hex digits, under `_shared`.
var sharedDirName = regexp.MustCompile(`^[0-9a-f]{8}$`)

// CheckExtracted checks that create --from left the machine's layers in
// place: `<data-dir>/pack/.smolvm-extracted`, or, on releases with the
// shared store on Linux, a `<data-dir>/.pack-shared` pointer to a
// `_shared/<crc32>` directory with the marker and a non-empty `layers/`.
// A failure means the layers were evicted or never extracted.
func (d *Driver) CheckExtracted(ctx context.Context, name string) error {
	r, err := d.Release(ctx)
	if err != nil {
		return err
	}
	dir, err := d.DataDir(ctx, name)
	if err != nil {
		return err
	}
	private := filepath.Join(dir, "pack", ExtractedMarker)
	if _, err := os.Stat(private); err == nil {
		return nil
	}
	if r.Extract != pins.ExtractSharedOnLinux || runtime.GOOS != "linux" {
		return fmt.Errorf("the packed layers of %s are missing (%s): smolvm's extraction cache evicted them", name, private)
	}
	if err := checkSharedPointer(filepath.Join(dir, SharedPackPointer)); err != nil {
		return fmt.Errorf("the packed layers of %s are missing: neither %s nor a valid shared-store pointer: %w", name, private, err)
	}
	return nil
}

// checkSharedPointer validates a .pack-shared pointer as smolvm does
// (src/artifact_cache.rs read_lease_from_machine_dir) and the extraction
// it points to.
func checkSharedPointer(pointer string) error {
	info, err := os.Lstat(pointer)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() || info.Size() > 4096 {
		return fmt.Errorf("%s is not a small regular file", pointer)
	}
	raw, err := os.ReadFile(pointer)
	if err != nil {
		return err
	}
	target := string(trimSpace(raw))
	switch {
	case target == "" || !filepath.IsAbs(target) || filepath.Clean(target) != target:
		return fmt.Errorf("%s does not hold a clean absolute path", pointer)
	case !sharedDirName.MatchString(filepath.Base(target)) || filepath.Base(filepath.Dir(target)) != "_shared":
		return fmt.Errorf("%s points outside a _shared/<crc32> directory: %q", pointer, target)
	}
	if info, err := os.Lstat(target); err != nil || !info.IsDir() {
		return errors.Join(fmt.Errorf("shared pack %s is not a directory", target), err)
	}
	if _, err := os.Stat(filepath.Join(target, ExtractedMarker)); err != nil {
		return fmt.Errorf("shared pack %s is not fully extracted: %w", target, err)
	}
	layers, err := os.ReadDir(filepath.Join(target, "layers"))
	if err != nil || len(layers) == 0 {
		return errors.Join(fmt.Errorf("shared pack %s has no layers", target), err)
	}
	return nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
