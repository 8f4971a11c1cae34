package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/oci/layout"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Events receives progress and log events; *protocol.EventWriter is one.
type Events interface {
	Emit(protocol.Event) error
}

// DefaultStallTimeout is how long a pull may go without receiving a byte.
const DefaultStallTimeout = 600 * time.Second

// ErrStalled is returned when a pull received no bytes for the stall timeout.
var ErrStalled = errors.New("image pull stalled")

// PullOptions tune Pull.
type PullOptions struct {
	// Platform to select from a multi-platform index; the zero value means
	// linux and the agent's own architecture.
	Platform Platform
	// StallTimeout stops a pull that received no bytes for this long; a
	// slow pull that keeps receiving is never stopped. 0 means the default.
	StallTimeout time.Duration
	// CertDir holds extra CA certificates (*.crt) for the registry; "" uses
	// the system's. Tests point it at their TLS server's certificate.
	CertDir string
	// Events receives progress; nil discards it.
	Events Events
}

func (o *PullOptions) fill() {
	if o.Platform == (Platform{}) {
		o.Platform = Platform{OS: "linux", Architecture: runtime.GOARCH}
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.Events == nil {
		o.Events = discardEvents{}
	}
}

type discardEvents struct{}

func (discardEvents) Emit(protocol.Event) error { return nil }

var quietContainersImage sync.Once

// Pull copies the platform image of ref into the OCI layout cacheDir and
// returns it verified. Blobs completed by an earlier, failed attempt into the
// same cacheDir are reused; partial blobs are not.
func Pull(ctx context.Context, ref Reference, cacheDir string, opt PullOptions) (*Image, error) {
	opt.fill()
	quietContainersImage.Do(func() { logrus.SetOutput(io.Discard) })
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating blob cache: %w", err)
	}
	if err := removeGlob(cacheDir, "oci-put-blob*"); err != nil {
		return nil, err
	}
	sys, cleanup, err := systemContext(filepath.Dir(cacheDir), opt)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	src, err := docker.ParseReference("//" + ref.Canonical())
	if err != nil {
		return nil, fmt.Errorf("image reference %s: %w", ref, err)
	}
	dst, err := layout.NewReference(cacheDir, refName)
	if err != nil {
		return nil, fmt.Errorf("blob cache %s: %w", cacheDir, err)
	}
	policy, err := signature.NewPolicyContext(&signature.Policy{Default: []signature.PolicyRequirement{signature.NewPRInsecureAcceptAnything()}})
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer policy.Destroy() //nolint:errcheck // nothing to report

	if err := copyWithStallDeadline(ctx, policy, dst, src, sys, opt); err != nil {
		return nil, err
	}
	img, err := openImage(cacheDir, opt.Platform)
	if err != nil {
		return nil, fmt.Errorf("pulled image %s: %w", ref, err)
	}
	return img, nil
}

// systemContext keeps containers/image away from the host's configuration:
// an empty registries.conf, no auth file, anonymous access, a private blob
// info cache.
func systemContext(dir string, opt PullOptions) (*types.SystemContext, func(), error) {
	conf, err := os.MkdirTemp(dir, ".pull-config-")
	if err != nil {
		return nil, nil, fmt.Errorf("creating pull configuration: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(conf) }
	reg := filepath.Join(conf, "registries.conf")
	if err := os.WriteFile(reg, nil, 0o600); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("writing %s: %w", reg, err)
	}
	sys := &types.SystemContext{
		SystemRegistriesConfPath:    reg,
		SystemRegistriesConfDirPath: filepath.Join(conf, "registries.conf.d"),
		RegistriesDirPath:           filepath.Join(conf, "registries.d"),
		AuthFilePath:                filepath.Join(conf, "auth.json"),
		SignaturePolicyPath:         filepath.Join(conf, "policy.json"),
		UserShortNameAliasConfPath:  filepath.Join(conf, "shortnames.conf"),
		BlobInfoCacheDir:            conf,
		BigFilesTemporaryDir:        conf,
		DockerAuthConfig:            &types.DockerAuthConfig{},
		DockerRegistryUserAgent:     "hermes-box-agent",
		OSChoice:                    opt.Platform.OS,
		ArchitectureChoice:          opt.Platform.Architecture,
		DockerCertPath:              opt.CertDir,
	}
	return sys, cleanup, nil
}

// copyWithStallDeadline runs copy.Image and cancels it once no progress
// event (each one means bytes arrived) came for opt.StallTimeout.
func copyWithStallDeadline(ctx context.Context, policy *signature.PolicyContext, dst, src types.ImageReference, sys *types.SystemContext, opt PullOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interval := min(opt.StallTimeout/4, time.Second)
	progress := make(chan types.ProgressProperties)
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var stalled atomic.Bool
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		relayProgress(progress, done, &last, opt.Events)
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(max(opt.StallTimeout/20, 5*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if time.Since(time.Unix(0, last.Load())) > opt.StallTimeout {
					stalled.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	_, err := copy.Image(ctx, policy, dst, src, &copy.Options{
		SourceCtx:        sys,
		DestinationCtx:   sys,
		PreserveDigests:  true,
		Progress:         progress,
		ProgressInterval: interval,
		ReportWriter:     io.Discard,
	})
	close(done)
	wg.Wait()
	switch {
	case err != nil && stalled.Load():
		return fmt.Errorf("%w: no bytes received for %s; stopped the pull (completed blobs stay cached for the next attempt)", ErrStalled, opt.StallTimeout)
	case err != nil:
		return fmt.Errorf("pulling %s: %w", strings.TrimPrefix(src.StringWithinTransport(), "//"), err)
	}
	return nil
}

// relayProgress turns containers/image progress into protocol events and
// notes when bytes last arrived.
func relayProgress(progress <-chan types.ProgressProperties, done <-chan struct{}, last *atomic.Int64, events Events) {
	for {
		select {
		case <-done:
			return
		case p := <-progress:
			last.Store(time.Now().UnixNano())
			ev := protocol.Event{Type: protocol.EventProgress, Step: "executor-pull", Level: protocol.LevelInfo,
				Progress: &protocol.Progress{Current: int64(p.Offset), Total: p.Artifact.Size, Unit: "bytes"},
				Fields:   map[string]string{"blob": string(p.Artifact.Digest)}}
			switch p.Event {
			case types.ProgressEventNewArtifact:
				ev.Message = "downloading blob"
			case types.ProgressEventRead:
				ev.Message = "downloading"
			case types.ProgressEventDone:
				ev.Message = "blob done"
				ev.Progress.Current = p.Artifact.Size
			case types.ProgressEventSkipped:
				ev.Message = "blob already cached"
				ev.Progress.Current = p.Artifact.Size
			default:
				continue
			}
			_ = events.Emit(ev)
		}
	}
}

// removeGlob removes every match of pattern in dir.
func removeGlob(dir, pattern string) error {
	matches, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			return fmt.Errorf("removing stale %s: %w", m, err)
		}
	}
	return nil
}
