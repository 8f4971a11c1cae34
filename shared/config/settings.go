package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Names of the settings and of the control variables.
const (
	keyPrefix = "HERMES_BOX_"

	keyMachineName     = "HERMES_BOX_MACHINE_NAME"
	keyBuilderName     = "HERMES_BOX_BUILDER_NAME"
	keySSHPort         = "HERMES_BOX_SSH_PORT"
	keyCPUs            = "HERMES_BOX_CPUS"
	keyMemoryMiB       = "HERMES_BOX_MEMORY_MIB"
	keyStorageGB       = "HERMES_BOX_STORAGE_GB"
	keyOverlayGB       = "HERMES_BOX_OVERLAY_GB"
	keySnapshotMaxMiB  = "HERMES_BOX_SNAPSHOT_MAX_MIB"
	keySnapshotIncr    = "HERMES_BOX_SNAPSHOT_INCREMENTAL"
	keyPruneKeepLast   = "HERMES_BOX_PRUNE_KEEP_LAST"
	keyPruneKeepDaily  = "HERMES_BOX_PRUNE_KEEP_DAILY"
	keyPruneKeepWeekly = "HERMES_BOX_PRUNE_KEEP_WEEKLY"
	keyNetworkMode     = "HERMES_BOX_NETWORK_MODE"
	keyVMMConfinement  = "HERMES_BOX_VMM_CONFINEMENT"
	keyHermesCommit    = "HERMES_BOX_HERMES_COMMIT"
	keyExecutorEnabled = "HERMES_BOX_EXECUTOR_ENABLED"
	keyExecutorPort    = "HERMES_BOX_EXECUTOR_PORT"
	keyExecutorImage   = "HERMES_BOX_EXECUTOR_IMAGE"
	keyDataDir         = "HERMES_BOX_DATA_DIR"
	keySSHKey          = "HERMES_BOX_SSH_KEY"
	keyUVSHA256        = "HERMES_BOX_UV_SHA256"
	keyCodexSHA256     = "HERMES_BOX_CODEX_SHA256"

	// EnvConfig names the environment variable that replaces the path of
	// hermes-box.conf when it is set and non-empty.
	EnvConfig      = "HERMES_BOX_CONFIG"
	envE2E         = "HERMES_BOX_E2E"
	envProjectRoot = "HERMES_BOX_PROJECT_ROOT"
)

const (
	defaultHermesCommit  = pins.DefaultHermesCommit
	defaultExecutorImage = pins.DefaultExecutorImage
)

// setting is one key of hermes-box.conf.
type setting struct {
	key   string
	def   string            // default, spelled as in the file
	field func(*Config) any // pointer to the field: *string, *int, *bool or *NetworkMode
	check func(any) error   // validates the field through that pointer; nil when any value is valid
}

// settings lists every key in the order of hermes-box.conf.example.
var settings = []setting{
	{keyMachineName, "hermes-box", func(c *Config) any { return &c.MachineName }, checkBoxName},
	{keyBuilderName, "hermes-builder", func(c *Config) any { return &c.BuilderName }, checkBuilderName},
	{keySSHPort, "2222", func(c *Config) any { return &c.SSHPort }, checkPort},
	{keyCPUs, "4", func(c *Config) any { return &c.CPUs }, checkPositive},
	{keyMemoryMiB, "8192", func(c *Config) any { return &c.MemoryMiB }, checkPositive},
	{keyStorageGB, "15", func(c *Config) any { return &c.StorageGB }, checkPositive},
	{keyOverlayGB, "6", func(c *Config) any { return &c.OverlayGB }, checkPositive},
	{keySnapshotMaxMiB, "0", func(c *Config) any { return &c.SnapshotMaxMiB }, checkNonNegative},
	{keySnapshotIncr, "true", func(c *Config) any { return &c.SnapshotIncremental }, nil},
	{keyPruneKeepLast, "0", func(c *Config) any { return &c.PruneKeepLast }, checkNonNegative},
	{keyPruneKeepDaily, "0", func(c *Config) any { return &c.PruneKeepDaily }, checkNonNegative},
	{keyPruneKeepWeekly, "0", func(c *Config) any { return &c.PruneKeepWeekly }, checkNonNegative},
	{keyNetworkMode, string(NetworkFull), func(c *Config) any { return &c.NetworkMode }, checkNetworkMode},
	{keyVMMConfinement, ConfinementEnforce, func(c *Config) any { return &c.VMMConfinement }, checkConfinement},
	{keyHermesCommit, defaultHermesCommit, func(c *Config) any { return &c.HermesCommit }, checkCommit},
	{keyExecutorEnabled, "false", func(c *Config) any { return &c.ExecutorEnabled }, nil},
	// The Executor port and image are checked by Validate, and only when enabled.
	{keyExecutorPort, strconv.Itoa(boxlayout.ExecutorPort), func(c *Config) any { return &c.ExecutorPort }, nil},
	{keyExecutorImage, defaultExecutorImage, func(c *Config) any { return &c.ExecutorImage }, nil},
	{keyDataDir, "", func(c *Config) any { return &c.DataDirOverride }, nil},
	{keySSHKey, "", func(c *Config) any { return &c.SSHKeyOverride }, nil},
	{keyUVSHA256, "", func(c *Config) any { return &c.UVSHA256 }, checkSHA256},
	{keyCodexSHA256, "", func(c *Config) any { return &c.CodexSHA256 }, checkSHA256},
}

// replacedSettings are keys that are no longer settings, with what
// replaced them: the configuration that still sets one is refused, so
// nothing is silently ignored.
var replacedSettings = map[string]string{
	"HERMES_BOX_SMOLVM_ALLOW_NEWER": "was replaced by `hermes-box doctor`, which qualifies a newer smolvm on this host " +
		"(a release that passes is accepted for that binary); remove the setting",
}

// lookupSetting returns the setting named key.
func lookupSetting(key string) (setting, bool) {
	for _, s := range settings {
		if s.key == key {
			return s, true
		}
	}
	return setting{}, false
}

// isReserved reports whether key is a setting or a control variable.
func isReserved(key string) bool {
	_, ok := lookupSetting(key)
	return ok || key == EnvConfig || key == envE2E || key == envProjectRoot
}

// set parses v into the field of c and checks it. An empty v sets the default.
func (s setting) set(c *Config, v string) error {
	if err := s.assign(c, v); err != nil {
		return err
	}
	if s.check == nil {
		return nil
	}
	return s.check(s.field(c))
}

// assign parses v into the field of c without checking it.
func (s setting) assign(c *Config, v string) error {
	if v == "" {
		v = s.def
	}
	switch p := s.field(c).(type) {
	case *string:
		*p = v
	case *NetworkMode:
		*p = NetworkMode(v)
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("must be an integer, got %q", v)
		}
		*p = n
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be true or false, got %q", v)
		}
		*p = b
	}
	return nil
}

// format returns the field of c spelled as in the file.
func (s setting) format(c *Config) string {
	switch p := s.field(c).(type) {
	case *string:
		return *p
	case *NetworkMode:
		return string(*p)
	case *int:
		return strconv.Itoa(*p)
	case *bool:
		return strconv.FormatBool(*p)
	}
	return ""
}

func checkPort(p any) error {
	if n := *p.(*int); n < 1 || n > 65535 {
		return fmt.Errorf("must be a port from 1 to 65535, got %d", n)
	}
	return nil
}

func checkNonNegative(p any) error {
	if n := *p.(*int); n < 0 {
		return fmt.Errorf("must be at least 0, got %d", n)
	}
	return nil
}

func checkPositive(p any) error {
	if n := *p.(*int); n < 1 {
		return fmt.Errorf("must be at least 1, got %d", n)
	}
	return nil
}

func checkNetworkMode(p any) error {
	switch m := *p.(*NetworkMode); m {
	case NetworkFull, NetworkStrict, NetworkNone:
		return nil
	default:
		return fmt.Errorf("must be one of full, strict or none, got %q", m)
	}
}

func checkConfinement(p any) error {
	switch v := *p.(*string); v {
	case ConfinementEnforce, ConfinementOff:
		return nil
	default:
		return fmt.Errorf("must be %s or %s, got %q", ConfinementEnforce, ConfinementOff, v)
	}
}

func checkCommit(p any) error {
	if v := *p.(*string); len(v) != 40 || !isHex(v, true) {
		return fmt.Errorf("must be a 40-character hexadecimal commit id, got %q", v)
	}
	return nil
}

func checkSHA256(p any) error {
	if v := *p.(*string); v != "" && (len(v) != 64 || !isHex(v, false)) {
		return fmt.Errorf("must be 64 lowercase hexadecimal characters, got %q", v)
	}
	return nil
}

// checkImage accepts NAME:TAG@sha256:<64 lowercase hex> without whitespace.
func checkImage(image string) error {
	name, digest, ok := strings.Cut(image, "@sha256:")
	switch {
	case strings.ContainsFunc(image, unicode.IsSpace):
		return fmt.Errorf("must not contain whitespace, got %q", image)
	case !ok || len(digest) != 64 || !isHex(digest, false):
		return fmt.Errorf("must be pinned as NAME:TAG@sha256:<64 lowercase hex>, got %q", image)
	case name == "":
		return fmt.Errorf("must name an image before the digest, got %q", image)
	}
	last := name[strings.LastIndexByte(name, '/')+1:]
	if repo, tag, ok := strings.Cut(last, ":"); !ok || repo == "" || tag == "" {
		return fmt.Errorf("must have a tag in NAME:TAG@sha256:<digest>, got %q", image)
	}
	return nil
}

// isHex reports whether s is made only of hex digits, with upper case
// letters allowed when upper is true.
func isHex(s string, upper bool) bool {
	for i := range len(s) {
		c := s[i]
		ok := ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || (upper && 'A' <= c && c <= 'F')
		if !ok {
			return false
		}
	}
	return true
}
