package smolvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// Port publishes a guest port on the host (`-p HOST:GUEST`). smolvm 1.0.4
// binds the host side on 127.0.0.1 and ::1; there is no bind address flag.
type Port struct{ Host, Guest int }

func (p Port) String() string { return fmt.Sprintf("%d:%d", p.Host, p.Guest) }

// SecretRef maps a guest variable to a host variable whose value smolvm
// reads itself (`--secret-env GUEST=HOST`). Create refuses it for a
// machine created --from on every release whose row says smolvm drops it.
type SecretRef struct{ Guest, Host string }

// Egress is smolvm's own outbound policy for a machine (virtio-net).
type Egress struct {
	// AllowHosts are --allow-host names (DNS-filtered, resolved at start).
	AllowHosts []string
	// LocalhostOnly is --outbound-localhost-only; with the strict floor
	// nothing is reachable.
	LocalhostOnly bool
}

func (e Egress) set() bool { return len(e.AllowHosts) > 0 || e.LocalhostOnly }

// CreateSpec is `machine create`.
type CreateSpec struct {
	Name string
	// Exactly one of Image (an OCI image) and From (a .smolmachine).
	Image, From                           string
	CPUs, MemoryMiB, StorageGB, OverlayGB int // 0: smolvm's default
	Ports                                 []Port
	// Env holds KEY=VALUE pairs that are not secret: they are in argv.
	Env       []string
	SecretEnv []SecretRef
	Net       bool
	// NetBackend is "", "tsi" or "virtio-net".
	NetBackend string
	// Egress, when set, restricts outbound traffic; Create refuses it on a
	// release that does not enforce it for create --from.
	Egress Egress
	// PackCacheMaxBytes, when positive, raises the extraction-cache cap of
	// this call (SMOLVM_PACK_CACHE_MAX_BYTES), so 1.0.4 does not evict the
	// layers it has just extracted.
	PackCacheMaxBytes int64
	// SecretProbe is for hermes-box doctor alone: one --secret-env
	// GUEST=HOST passed on create --from even where the row says smolvm
	// drops it, with HOST set to a throwaway value in smolvm's
	// environment, so the doctor sees whether it does.
	SecretProbe *SecretProbe
}

// SecretProbe is a throwaway secret reference and its value.
type SecretProbe struct {
	SecretRef
	Value string
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Args returns the argv of the spec, after the program name.
func (s CreateSpec) Args() ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	args := []string{"machine", "create", "--name", s.Name}
	if s.Image != "" {
		args = append(args, "--image", s.Image)
	} else {
		args = append(args, "--from", s.From)
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"--cpus", s.CPUs}, {"--mem", s.MemoryMiB}, {"--storage", s.StorageGB}, {"--overlay", s.OverlayGB}} {
		if n.v > 0 {
			args = append(args, n.flag, strconv.Itoa(n.v))
		}
	}
	for _, p := range s.Ports {
		args = append(args, "-p", p.String())
	}
	for _, e := range s.Env {
		args = append(args, "-e", e)
	}
	for _, r := range s.SecretEnv {
		args = append(args, "--secret-env", r.Guest+"="+r.Host)
	}
	if p := s.SecretProbe; p != nil {
		args = append(args, "--secret-env", p.Guest+"="+p.Host)
	}
	if s.Net {
		args = append(args, "--net")
	}
	if s.NetBackend != "" {
		args = append(args, "--net-backend", s.NetBackend)
	}
	for _, h := range s.Egress.AllowHosts {
		args = append(args, "--allow-host", h)
	}
	if s.Egress.LocalhostOnly {
		args = append(args, "--outbound-localhost-only")
	}
	return args, nil
}

func (s CreateSpec) check() error {
	var errs []error
	if err := checkName(s.Name); err != nil {
		errs = append(errs, err)
	}
	if (s.Image == "") == (s.From == "") {
		errs = append(errs, errors.New("exactly one of image and from artifact is needed"))
	}
	for _, p := range s.Ports {
		if p.Host < 1 || p.Host > 65535 || p.Guest < 1 || p.Guest > 65535 {
			errs = append(errs, fmt.Errorf("invalid port mapping %s", p))
		}
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || !envName.MatchString(k) {
			// The value may be anything; only the key is named.
			errs = append(errs, fmt.Errorf("invalid environment entry for %q: want KEY=VALUE", k))
		}
	}
	refs := s.SecretEnv
	if p := s.SecretProbe; p != nil {
		refs = append(slices.Clone(refs), p.SecretRef)
	}
	for _, r := range refs {
		if !envName.MatchString(r.Guest) || !envName.MatchString(r.Host) {
			errs = append(errs, fmt.Errorf("invalid secret mapping %s=%s", r.Guest, r.Host))
		}
	}
	for _, h := range s.Egress.AllowHosts {
		if h == "" || strings.HasPrefix(h, "-") || strings.ContainsAny(h, " /:=") {
			errs = append(errs, fmt.Errorf("invalid allowed host %q", h))
		}
	}
	if len(s.Egress.AllowHosts) > 0 && s.Egress.LocalhostOnly {
		errs = append(errs, errors.New("allowed hosts and localhost-only together"))
	}
	switch s.NetBackend {
	case "", "tsi", "virtio-net":
	default:
		errs = append(errs, fmt.Errorf("unknown network backend %q", s.NetBackend))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("smolvm machine create: %w", err)
	}
	return nil
}

// Create creates a machine. It refuses what the release would silently
// drop for a machine created --from: secret refs everywhere, an egress
// policy where the row says it is not enforced.
func (d *Driver) Create(ctx context.Context, s CreateSpec) error {
	args, err := s.Args()
	if err != nil {
		return err
	}
	if s.From != "" && (len(s.SecretEnv) > 0 || s.Egress.set()) {
		r, err := d.Release(ctx)
		if err != nil {
			return err
		}
		if len(s.SecretEnv) > 0 && !r.SecretRefsOnCreateFrom {
			return fmt.Errorf("smolvm machine create: smolvm %s drops --secret-env on create --from; deliver secrets another way", r.Version)
		}
		if s.Egress.set() && !r.NetworkModesEnforced() {
			return fmt.Errorf("smolvm machine create: smolvm %s does not enforce --allow-host/--outbound-localhost-only on create --from", r.Version)
		}
	}
	c := Cmd{Args: args}
	if s.PackCacheMaxBytes > 0 {
		c.Env = []string{PackCacheEnv + "=" + strconv.FormatInt(s.PackCacheMaxBytes, 10)}
	}
	if p := s.SecretProbe; p != nil {
		c.Env = append(c.Env, p.Host+"="+p.Value)
	}
	_, err = d.run(ctx, "machine create", s.Name, c)
	return err
}

// UpdateSpec is `machine update` (the machine must be stopped).
type UpdateSpec struct {
	Name  string
	Net   bool // --net
	NoNet bool // --no-net
}

// Update changes a stopped machine. hermes-box re-applies --net before
// every first boot: 1.0.4 can record network=true and still boot without a
// NIC.
func (d *Driver) Update(ctx context.Context, s UpdateSpec) error {
	if s.Net && s.NoNet {
		return errors.New("smolvm machine update: --net and --no-net together")
	}
	args := []string{"machine", "update", "--name", s.Name}
	if s.Net {
		args = append(args, "--net")
	}
	if s.NoNet {
		args = append(args, "--no-net")
	}
	return d.simple(ctx, "machine update", s.Name, args...)
}

// PackSpec is `pack create --from-vm`.
type PackSpec struct {
	FromVM   string
	Smolfile string
	// Output is the stub's path; smolvm writes Output and Output.smolmachine.
	Output string
}

// PackCreate packs a stopped machine into a .smolmachine artifact. It runs
// with the boot environment: 1.9.x boots a networked helper to export.
func (d *Driver) PackCreate(ctx context.Context, s PackSpec) error {
	if s.Output == "" {
		return errors.New("smolvm pack create: no output path")
	}
	if err := checkName(s.FromVM); err != nil {
		return err
	}
	env, err := d.bootEnv(ctx)
	if err != nil {
		return err
	}
	args := []string{"pack", "create", "--from-vm", s.FromVM}
	if s.Smolfile != "" {
		args = append(args, "--smolfile", s.Smolfile)
	}
	args = append(args, "--output", s.Output)
	if r, rerr := d.Release(ctx); rerr == nil && r.ExportHelperMemoryVar {
		env = append(env, fmt.Sprintf("%s=%d", ExportHelperMemoryEnv, pins.ExportHelperMemoryMiB))
	}
	_, err = d.run(ctx, "pack create", s.FromVM, Cmd{Args: args, Env: env})
	return err
}

// ExportHelperMemoryEnv sets the memory of `pack create --from-vm`'s
// helper VM (pins.SmolvmRelease.ExportHelperMemoryVar).
const ExportHelperMemoryEnv = "SMOLVM_EXPORT_HELPER_MEMORY_MIB"

// ExecSpec is `machine exec`.
type ExecSpec struct {
	Name string
	// Argv is the command; it is passed as an argument vector, not parsed
	// by a shell.
	Argv []string
	// Env holds KEY=VALUE pairs that are not secret.
	Env []string
	// Stream prints output as it arrives (--stream).
	Stream bool
	// Timeout, when positive, has smolvm kill the command (status 124).
	Timeout time.Duration
	// Stdin, when not nil, is forwarded (-i: 1.0.4 reads stdin only in
	// interactive mode, and closes the guest's stdin at its EOF).
	Stdin io.Reader
	// Stdout and Stderr receive the command's output; nil captures it.
	Stdout, Stderr io.Writer
}

// Args returns the argv of the spec, after the program name. exec takes
// --name only: 1.0.4 has no -n on exec.
func (s ExecSpec) Args() ([]string, error) {
	if err := checkName(s.Name); err != nil {
		return nil, err
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, errors.New("smolvm machine exec: no command")
	}
	args := []string{"machine", "exec"}
	if s.Stream {
		args = append(args, "--stream")
	}
	if s.Stdin != nil {
		args = append(args, "-i")
	}
	args = append(args, "--name", s.Name)
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || !envName.MatchString(k) {
			return nil, fmt.Errorf("smolvm machine exec: invalid environment entry for %q", k)
		}
		args = append(args, "-e", e)
	}
	if s.Timeout > 0 {
		args = append(args, "--timeout", formatDuration(s.Timeout))
	}
	args = append(args, "--")
	return append(args, s.Argv...), nil
}

// Exec runs a command in the machine. The guest command's exit status is
// returned, not an error; err is set when smolvm could not run, and wraps
// ErrTimeout when --timeout expired. Captured output is in Result.
func (d *Driver) Exec(ctx context.Context, s ExecSpec) (Result, error) {
	args, err := s.Args()
	if err != nil {
		return Result{}, err
	}
	res, err := d.call(ctx, Cmd{Args: args, Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr})
	if err != nil {
		return res, fmt.Errorf("smolvm machine exec %s: %w", s.Name, err)
	}
	if res.ExitCode == ExitTimeout && s.Timeout > 0 {
		return res, fmt.Errorf("smolvm machine exec %s: %w after %v", s.Name, ErrTimeout, s.Timeout)
	}
	return res, nil
}
