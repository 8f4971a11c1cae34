package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hermes-box/hermes-box/shared/filenames"
)

// File names inside the project root.
const (
	FileName        = "hermes-box.conf"
	SecretsFileName = "secret-env.txt"
)

// NetworkMode is the guest's network access, HERMES_BOX_NETWORK_MODE.
type NetworkMode string

// The network modes the configuration accepts. The host refuses every mode
// but full when it creates a machine; that check is not made here.
const (
	NetworkFull   NetworkMode = "full"
	NetworkStrict NetworkMode = "strict"
	NetworkNone   NetworkMode = "none"
)

// The values of HERMES_BOX_VMM_CONFINEMENT.
const (
	ConfinementEnforce = "enforce"
	ConfinementOff     = "off"
)

// Config is the resolved hermes-box configuration. Each field names the
// setting it comes from.
type Config struct {
	// ProjectRoot is the absolute, clean project directory.
	ProjectRoot string
	// File is the configuration file consulted: <ProjectRoot>/hermes-box.conf,
	// or $HERMES_BOX_CONFIG as given. The first need not exist; a file
	// HERMES_BOX_CONFIG names must.
	File string
	// Secrets are the mappings of <ProjectRoot>/secret-env.txt.
	Secrets []SecretMapping
	// NetworkHosts are the hosts of <ProjectRoot>/network-hosts.txt, the
	// allow-list of HERMES_BOX_NETWORK_MODE=strict.
	NetworkHosts []string

	MachineName string // HERMES_BOX_MACHINE_NAME
	BuilderName string // HERMES_BOX_BUILDER_NAME
	SSHPort     int    // HERMES_BOX_SSH_PORT, on 127.0.0.1
	CPUs        int    // HERMES_BOX_CPUS
	MemoryMiB   int    // HERMES_BOX_MEMORY_MIB
	StorageGB   int    // HERMES_BOX_STORAGE_GB
	OverlayGB   int    // HERMES_BOX_OVERLAY_GB
	// SnapshotMaxMiB (HERMES_BOX_SNAPSHOT_MAX_MIB) bounds one backup part;
	// 0 derives it from the disks (SnapshotPartCap).
	SnapshotMaxMiB int
	// SnapshotIncremental (HERMES_BOX_SNAPSHOT_INCREMENTAL, true by
	// default) makes every snapshot, the restore's safety snapshot
	// included, an incremental one into the machine's chunk store (only
	// new chunks cross the relay); false writes self-contained
	// hermes-box-v2 backups.
	SnapshotIncremental bool
	// PruneKeepLast, PruneKeepDaily and PruneKeepWeekly
	// (HERMES_BOX_PRUNE_KEEP_LAST, _DAILY, _WEEKLY) are the retention
	// policy `snapshot` applies after each backup (`backups prune`); all 0,
	// the default, prunes nothing.
	PruneKeepLast   int
	PruneKeepDaily  int
	PruneKeepWeekly int
	NetworkMode     NetworkMode // HERMES_BOX_NETWORK_MODE
	// VMMConfinement (HERMES_BOX_VMM_CONFINEMENT) is ConfinementEnforce:
	// on Linux every call that boots a VMM asks smolvm for its seccomp and
	// Landlock confinement, and a started VMM without a seccomp filter is
	// refused; ConfinementOff asks for neither, and every command warns.
	VMMConfinement  string
	HermesCommit    string // HERMES_BOX_HERMES_COMMIT, 40 hex characters
	ExecutorEnabled bool   // HERMES_BOX_EXECUTOR_ENABLED
	ExecutorPort    int    // HERMES_BOX_EXECUTOR_PORT
	ExecutorImage   string // HERMES_BOX_EXECUTOR_IMAGE, NAME:TAG@sha256:<digest>

	// DataDirOverride is HERMES_BOX_DATA_DIR as configured; "" means the
	// project root. Use DataDir for the resolved path.
	DataDirOverride string
	// SSHKeyOverride is HERMES_BOX_SSH_KEY as configured; "" means the
	// generated project key. Use SSHKeyPath for the resolved path.
	SSHKeyOverride string

	// UVSHA256 and CodexSHA256 (HERMES_BOX_UV_SHA256, HERMES_BOX_CODEX_SHA256)
	// supply the SHA-256 of guest archives that have no pinned digest, as 64
	// lowercase hex characters; "" means none.
	UVSHA256    string
	CodexSHA256 string
}

// Default returns the built-in defaults for the project at projectRoot, which
// should be absolute. It reads no file and no environment.
func Default(projectRoot string) *Config {
	root := filepath.Clean(projectRoot)
	c := &Config{ProjectRoot: root, File: filepath.Join(root, FileName)}
	for _, s := range settings {
		if err := s.assign(c, s.def); err != nil {
			panic("config: invalid default: " + err.Error()) // unreachable: defaults are tested constants
		}
	}
	return c
}

// Load returns the configuration of the project at projectRoot: defaults,
// overridden by the configuration file, overridden by environ (in the form of
// os.Environ; later duplicates win). An empty value anywhere means the key's
// default. A missing hermes-box.conf or secret-env.txt is fine; a missing
// file named by HERMES_BOX_CONFIG, a setting set twice in the file and a
// setting's name in the wrong case there are errors.
//
// In environ, a HERMES_BOX_* name must be a setting, HERMES_BOX_CONFIG,
// HERMES_BOX_E2E, HERMES_BOX_PROJECT_ROOT, or a host variable named in
// secret-env.txt, whose value Load never reads; in the file it must be a
// setting. Other names are ignored. The result has passed Validate.
func Load(projectRoot string, environ []string) (*Config, error) {
	root, err := filepath.Abs(projectRoot)
	if err != nil {
		return nil, fmt.Errorf("resolving project root: %w", err)
	}
	c := Default(root)
	env := hermesEnviron(environ)
	named := env[EnvConfig] != ""
	if named {
		c.File = env[EnvConfig]
	}
	secretsPath := filepath.Join(root, SecretsFileName)
	if c.Secrets, err = LoadSecretMappings(secretsPath); err != nil {
		return nil, err
	}
	if err := checkSecretHosts(secretsPath, c.Secrets); err != nil {
		return nil, err
	}
	if c.NetworkHosts, err = LoadNetworkHosts(filepath.Join(root, NetworkHostsFileName)); err != nil {
		return nil, err
	}
	errs, err := c.applyFile(named)
	if err != nil {
		return nil, err
	}
	errs = append(errs, c.applyEnviron(env)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// hermesEnviron returns the HERMES_BOX_* entries of environ, later ones
// winning.
func hermesEnviron(environ []string) map[string]string {
	env := make(map[string]string)
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, keyPrefix) {
			env[k] = v
		}
	}
	return env
}

// checkSecretHosts refuses host variables that are also hermes-box settings
// or control variables, so a secret never doubles as configuration.
func checkSecretHosts(path string, ms []SecretMapping) error {
	var errs []error
	for _, m := range ms {
		if isReserved(m.Host) {
			errs = append(errs, &Error{File: path, Line: m.Line, Key: m.Host,
				Msg: fmt.Sprintf("host variable %q is a Hermes Box setting and cannot hold a secret", m.Host)})
		}
	}
	return errors.Join(errs...)
}

// applyFile applies the assignments of c.File. It returns the problems with
// individual settings, and err when the file cannot be read or parsed. A
// missing file means the defaults, unless HERMES_BOX_CONFIG named it
// (named): then it is an error, as a mistyped path must not silently run
// with the defaults.
func (c *Config) applyFile(named bool) (problems []error, err error) {
	f, err := os.Open(c.File)
	if errors.Is(err, fs.ErrNotExist) && !named {
		return nil, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &Error{Key: EnvConfig, Msg: fmt.Sprintf("%s names %s, which does not exist", EnvConfig, c.File)}
	}
	if err != nil {
		return nil, fmt.Errorf("opening configuration file: %w", err)
	}
	defer f.Close()
	assignments, err := Parse(f, c.File)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for _, a := range assignments {
		upper := strings.ToUpper(a.Key)
		if !strings.HasPrefix(upper, keyPrefix) {
			continue
		}
		problem := &Error{File: c.File, Line: a.Line, Key: a.Key}
		first, twice := seen[a.Key]
		if !twice {
			seen[a.Key] = a.Line
		}
		if why, ok := replacedSettings[a.Key]; ok {
			problem.Msg = a.Key + " " + why
		} else if s, ok := lookupSetting(a.Key); !ok && a.Key != upper {
			problem.Msg = fmt.Sprintf("%q is not a setting: settings are upper-case (%s)", a.Key, upper)
		} else if twice {
			problem.Msg = fmt.Sprintf("%s is set twice (lines %d and %d): keep one", a.Key, first, a.Line)
		} else if !ok {
			problem.Msg = fmt.Sprintf("unknown Hermes Box setting %q", a.Key)
		} else if err := s.set(c, a.Value); err != nil {
			problem.Msg = a.Key + " " + err.Error()
		} else {
			continue
		}
		problems = append(problems, problem)
	}
	return problems, nil
}

// applyEnviron applies the settings in env, in name order, and returns the
// problems found.
func (c *Config) applyEnviron(env map[string]string) []error {
	hosts := make(map[string]bool)
	for _, m := range c.Secrets {
		hosts[m.Host] = true
	}
	var problems []error
	for _, key := range slices.Sorted(maps.Keys(env)) {
		if hosts[key] || key == EnvConfig || key == envE2E || key == envProjectRoot {
			continue
		}
		if why, ok := replacedSettings[key]; ok {
			problems = append(problems, &Error{Key: key, Msg: "environment variable " + key + " " + why})
			continue
		}
		s, ok := lookupSetting(key)
		if !ok {
			problems = append(problems, &Error{Key: key, Msg: fmt.Sprintf("unknown Hermes Box environment setting %q", key)})
			continue
		}
		if err := s.set(c, env[key]); err != nil {
			problems = append(problems, &Error{Key: key, Msg: "environment variable " + key + " " + err.Error()})
		}
	}
	return problems
}

// Validate checks every setting of c and returns all problems, joined, each
// an *Error naming its key. The Executor port and image are checked only when
// the Executor is enabled.
func (c *Config) Validate() error {
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: key + " " + fmt.Sprintf(format, args...)})
	}
	for _, s := range settings {
		if s.check == nil {
			continue
		}
		if err := s.check(s.field(c)); err != nil {
			fail(s.key, "%v", err)
		}
	}
	if c.MachineName != "" && c.MachineName == c.BuilderName {
		fail(keyMachineName, "must differ from %s, both are %q", keyBuilderName, c.MachineName)
	}
	if c.ExecutorEnabled {
		if err := checkPort(&c.ExecutorPort); err != nil {
			fail(keyExecutorPort, "%v", err)
		} else if c.ExecutorPort == c.SSHPort {
			fail(keyExecutorPort, "must differ from %s, both are %d", keySSHPort, c.SSHPort)
		}
		if err := checkImage(c.ExecutorImage); err != nil {
			fail(keyExecutorImage, "%v", err)
		}
	}
	return errors.Join(errs...)
}

// Assignments returns every setting of c as an assignment, in the order of
// hermes-box.conf.example, without line numbers. Writing their String forms
// to a file and loading it gives back the same settings.
func (c *Config) Assignments() []Assignment {
	out := make([]Assignment, 0, len(settings))
	for _, s := range settings {
		out = append(out, Assignment{Key: s.key, Value: s.format(c)})
	}
	return out
}

// DataDir is the absolute directory holding state/, images/ and backups/.
func (c *Config) DataDir() string {
	if c.DataDirOverride == "" {
		return c.ProjectRoot
	}
	return c.resolve(c.DataDirOverride)
}

// StateDir is <DataDir>/state: keys, pinned host keys and other host state.
func (c *Config) StateDir() string { return filepath.Join(c.DataDir(), filenames.StateDir) }

// BackupsDir is <DataDir>/backups.
func (c *Config) BackupsDir() string { return filepath.Join(c.DataDir(), filenames.BackupsDir) }

// ImagesDir is <DataDir>/images.
func (c *Config) ImagesDir() string { return filepath.Join(c.DataDir(), filenames.ImagesDir) }

// SSHKeyPath is the private key used to reach the guest: HERMES_BOX_SSH_KEY
// resolved against the project root, or <StateDir>/hermes-box-ed25519.
func (c *Config) SSHKeyPath() string {
	if c.SSHKeyOverride == "" {
		return filepath.Join(c.StateDir(), filenames.SSHKey)
	}
	return c.resolve(c.SSHKeyOverride)
}

// ExternalSSHKey reports whether the SSH key is supplied by the user, in
// which case it must exist and is never generated.
func (c *Config) ExternalSSHKey() bool { return c.SSHKeyOverride != "" }

// resolve makes p absolute against the project root and cleans it.
func (c *Config) resolve(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(c.ProjectRoot, p)
}

// AutoPrune reports whether `snapshot` prunes after each backup: a
// retention count is set.
func (c *Config) AutoPrune() bool {
	return c.PruneKeepLast > 0 || c.PruneKeepDaily > 0 || c.PruneKeepWeekly > 0
}

// SnapshotPartCap is the most bytes one part of a backup (rootfs.tar.gz,
// workspace.tar.gz) may have: HERMES_BOX_SNAPSHOT_MAX_MIB when set, else the
// box's disks (storage plus overlay) plus 1 GiB: a compressed archive of
// what the disks hold is never larger, so a stream past it is not the box's
// files.
func (c *Config) SnapshotPartCap() int64 {
	if c.SnapshotMaxMiB > 0 {
		return int64(c.SnapshotMaxMiB) << 20
	}
	return int64(c.StorageGB+c.OverlayGB+1) << 30
}
