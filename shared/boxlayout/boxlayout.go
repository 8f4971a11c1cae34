// Package boxlayout names the places of a box once, for the host and the
// agent alike: the guest's paths, its accounts, its ports, its services
// and the file names both sides agree on. A path here is absolute in the
// guest; where the agent works below another root (--root, tests) it
// joins the root and the path.
package boxlayout

// The agent and its helper in the guest.
const (
	// AgentPath is the agent binary in the box.
	AgentPath = "/usr/local/sbin/hermes-box-agent"
	// OCIHelperName is the agent's Executor helper (the image pull), which
	// lives beside the agent.
	OCIHelperName = "hermes-box-agent-oci"
	// OCIHelperPath is the helper in the box.
	OCIHelperPath = "/usr/local/sbin/" + OCIHelperName
	// RelayCommand is the one remote command of the SSH relay.
	RelayCommand = "sudo -n " + AgentPath + " relay"
)

// Accounts in the guest; each user's gid is its uid.
const (
	// AdminUser is the account the host logs in as over SSH.
	AdminUser = "boxadmin"
	AdminUID  = 1001
	AdminHome = "/home/" + AdminUser
	// ServiceUser runs Hermes and Executor.
	ServiceUser = "hermes"
	ServiceUID  = 1002
	ServiceHome = "/home/" + ServiceUser
)

// Hermes in the guest, outside the workspace.
const (
	// HermesTree is the installed Hermes source tree.
	HermesTree = "/usr/local/lib/hermes-agent"
	// HermesVenv is Hermes' virtualenv, root's (Hermes imports it at start).
	HermesVenv = HermesTree + "/venv"
	// HermesSourceMarker records the commit of the installed tree; the
	// approval-gate step writes it.
	HermesSourceMarker = HermesTree + "/.hermes-box-source"
	// HermesCLI is the hermes command.
	HermesCLI = "/usr/local/bin/hermes"
	// HermesConfig is Hermes' config, in the workspace.
	HermesConfig = HermesHome + "/config.yaml"
	// HermesManagedDir is Hermes' managed scope (0.17.0 and later):
	// root-owned, its config.yaml wins over HERMES_HOME's at every leaf,
	// and `hermes config set`/`unset` refuse the keys it holds.
	HermesManagedDir = "/etc/hermes"
)

// The system files hermes-box adds to the guest.
const (
	// SudoersFile gives the admin account its password-less sudo.
	SudoersFile = "/etc/sudoers.d/hermes-box"
	// SSHDDropIn is sshd's configuration for the box.
	SSHDDropIn = "/etc/ssh/sshd_config.d/99-hermes-box.conf"
	// AptNetworkConf bounds apt's network use.
	AptNetworkConf = "/etc/apt/apt.conf.d/80-hermes-box-network"
	// ProfileScript sets the box's environment in login shells.
	ProfileScript = "/etc/profile.d/hermes-box.sh"
	// SecretsProfile sources the mapped secrets in the service user's
	// login shells.
	SecretsProfile = "/etc/profile.d/hermes-box-secrets.sh"
	// AdminProfileTemplate is the admin account's login profile as shipped,
	// copied to its home.
	AdminProfileTemplate = "/usr/local/share/hermes-box/" + AdminUser + ".bash_profile"
)

// Ports inside the guest.
const (
	// SSHPort is the guest's sshd.
	SSHPort = 22
	// ExecutorPort is Executor's fixed port in the box, also the default of
	// its published port on the host.
	ExecutorPort = 4788
)

// ExecutorURL is Executor's MCP endpoint as seen from inside the box (on
// ExecutorPort; the package's test holds the two together).
const ExecutorURL = "http://127.0.0.1:4788/mcp"

// The workspace: the persistent tree a snapshot carries.
const (
	Workspace   = "/workspace"
	HermesHome  = Workspace + "/hermes-home"
	LogDir      = HermesHome + "/logs"
	WorkDir     = Workspace + "/work"
	CodexHome   = Workspace + "/codex-home"
	ExecutorDir = Workspace + "/executor"
	// ExecutorDataDir is Executor's data.
	ExecutorDataDir = ExecutorDir + "/data"
	// RuntimeDirName is the workspace's directory of unpacked runtimes,
	// which a snapshot leaves out.
	RuntimeDirName = ".hermes-box-runtime"
	// ExecutorRuntimeDir is the store of Executor releases.
	ExecutorRuntimeDir = Workspace + "/" + RuntimeDirName + "/executor"
	// GateAuditLog is the approval gate's hash-chained audit log.
	GateAuditLog = LogDir + "/gate-audit.jsonl"
)

// The agent's state in the guest, outside the workspace.
const (
	// StateDir holds the agent's state, root only.
	StateDir = "/var/lib/hermes-box"
	// RestoreReady is the marker a restore writes when the backup is
	// applied; a machine in restore mode starts its services only once it
	// exists.
	RestoreReady = StateDir + "/restore-ready"
	// OwnershipMarker records that first boot repaired the image's
	// ownership (the version suffix re-runs a changed repair).
	OwnershipMarker = StateDir + "/runtime-ownership-v2"
	// RestoredID names the seed or snapshot the workspace holds.
	RestoredID = StateDir + "/workspace-restored.id"
	// CodexPinFile records the Codex release first boot installs.
	CodexPinFile = StateDir + "/codex-pin.json"
	// GateVerdictCache keeps the gate probe's last verdict, keyed by a hash
	// of everything it depends on, so a health check with nothing changed
	// does not start Hermes' Python.
	GateVerdictCache = StateDir + "/gate-verdict.json"
	// GateAnchorsCache keeps the last passing verification of the gate's
	// edits in Hermes' source, keyed by a hash of the files it read, so a
	// health check of an unchanged tree does not verify them again.
	GateAnchorsCache = StateDir + "/gate-anchors.json"
	// CacheDir holds the agent's caches, which provisioning empties last.
	CacheDir = "/var/cache/hermes-box"
	// DownloadCache holds verified downloads.
	DownloadCache = CacheDir + "/downloads"
	// ChunkCache holds the chunk ids of the files of each part's last
	// incremental snapshot (never itself snapshotted).
	ChunkCache = CacheDir + "/chunks"
	// SmokeMarker records that the image's smoke test passed.
	SmokeMarker = StateDir + "/smoke-passed"
	// StartupLog is boot's log of its first-boot steps.
	StartupLog = "/var/log/hermes-box-startup.log"
	// SeedArchive is the tar of the builder's workspace the image carries
	// (smolvm 1.0.4's pack does not keep the builder's /workspace disk);
	// the first boot unpacks it.
	SeedArchive = StateDir + "/workspace-seed.tar"
	// SeedID names the seed SeedArchive holds.
	SeedID = StateDir + "/workspace-seed.id"
)

// The agent's files on /run, gone at every boot.
const (
	// RunDir holds the running agent's files.
	RunDir = "/run/hermes-box"
	// BoxOptionsFile is where a running boot records its options, so verbs
	// started outside the machine's environment (the relay's health) know
	// what this boot runs.
	BoxOptionsFile = RunDir + "/box-options.json"
	// ControlSocket is the running boot's control socket.
	ControlSocket = RunDir + "/agent.sock"
	// SSHDLog is the supervised sshd's log.
	SSHDLog = RunDir + "/sshd.log"
	// SecretsDir is the root-only tmpfs file tree of the mapped secrets.
	SecretsDir = "/run/hermes-box-secrets"
	// ExecutorDiscoveryRefreshed records the boot whose gateway was
	// restarted after Executor turned healthy, so Hermes discovers its tools.
	ExecutorDiscoveryRefreshed = "/run/hermes-box-executor-discovery-refreshed"
)

// InRoot is the guest path p (absolute, from this package) relative to the
// guest's root, as the entries of a snapshot's archive name it.
func InRoot(p string) string { return p[1:] }

// The parts of a snapshot, in the order they travel: the root file system
// (without the workspace) and the workspace.
const (
	PartRootfs    = "rootfs"
	PartWorkspace = "workspace"
)

// The supervised services.
const (
	SSHDService     = "sshd"
	HermesService   = "hermes"
	ExecutorService = "executor"
)

// Files the host copies into the builder.
const (
	// AuthorizedKeysUpload is where the host puts the project's public key
	// for provision.
	AuthorizedKeysUpload = "/tmp/hermes-box-authorized-keys"
	// TestPinsDir is where a test's stand-in pins are copied for provision.
	TestPinsDir = "/tmp/hermes-box-test-pins"
)

// The machine's environment, set by the host at create and read by boot.
const (
	EnvRestoreMode      = "HERMES_BOX_RESTORE_MODE"
	EnvExecutorEnabled  = "HERMES_BOX_EXECUTOR_ENABLED"
	EnvExecutorHostPort = "HERMES_BOX_EXECUTOR_HOST_PORT"
	EnvExecutorImage    = "HERMES_BOX_EXECUTOR_IMAGE"
)
