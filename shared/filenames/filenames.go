// Package filenames names the files and directories of the host's data
// dir once (as lima's limatype/filenames names an instance's): the
// directories below it, the project key, the packed base image and the
// files of state/. The agent's guest paths are shared/boxlayout's.
package filenames

// The directories of the data dir.
const (
	// StateDir holds the host's state: keys, pins, journals, markers.
	StateDir = "state"
	// ImagesDir holds the packed base image.
	ImagesDir = "images"
	// BackupsDir holds the backups.
	BackupsDir = "backups"
)

// The images directory.
const (
	// BaseArtifact is the packed base image every box is created from.
	BaseArtifact = "hermes-base.smolmachine"
	// BaseArtifactTemp begins the name of a base image being packed (the
	// packer's pid follows); it is renamed to BaseArtifact when complete.
	BaseArtifactTemp = "hermes-base.tmp-"
)

// The files of the state directory.
const (
	// SSHKey is the project's private key (its public key beside it with
	// ".pub" appended), unless HERMES_BOX_SSH_KEY names another.
	SSHKey = "hermes-box-ed25519"
	// HostKeysDir holds the pinned host key of each machine.
	HostKeysDir = "hostkeys"
	// KnownHosts is the known_hosts file `hermes-box ssh` hands OpenSSH.
	KnownHosts = "known_hosts"
	// NetworkProofLegacy is the one network-mode proof of a project that
	// earlier releases kept (any machine's last): read as the box's until
	// the box's own proof (NetworkProof) replaces it.
	NetworkProofLegacy = "network-proof.json"
	// AuditAnchor is the host's anchor of the gate's audit chain.
	AuditAnchor = "audit-anchor.json"
	// OperationLock is held for the length of every operation that
	// changes the box.
	OperationLock = "operation.lock"
	// OperationHolder names the operation that holds OperationLock.
	OperationHolder = "operation.holder"
	// RestoreJournal is the journal of a restore under way.
	RestoreJournal = "restore-journal"
	// BoxSettings records the settings the box was created with.
	BoxSettings = "box-settings.json"
	// BuilderInUse says this project's init created the builder, so the
	// next init deletes a builder an interrupted one left.
	BuilderInUse = "builder-in-use"
)

// NetworkProof is the file of state/ that records machine's last
// network-mode proof: one per machine, so that a restore candidate's proof
// never stands for the box's.
func NetworkProof(machine string) string {
	return "network-proof-" + machine + ".json"
}
