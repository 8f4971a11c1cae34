package backup

import (
	"encoding/json"
	"fmt"
	"strings"
)

// PortableFormat is portable.json's format value.
const PortableFormat = "hermes-box-portable-1"

// PortableInfo is portable.json: where a package came from and what the
// restoring host must provide. It holds names, never secret values.
type PortableInfo struct {
	Format  string `json:"format"`
	Created string `json:"created"` // UTC RFC 3339
	Backup  string `json:"backup"`  // the backup's directory below backups/
	Source  struct {
		OS        string `json:"os"`
		Arch      string `json:"arch"`
		HermesBox string `json:"hermesBox"`
		Smolvm    string `json:"smolvm"`
	} `json:"source"`
	// HostBinaries are the bin/ files that run hermes-box, per platform
	// ("darwin-arm64": "bin/hermes-box-darwin-arm64").
	HostBinaries map[string]string `json:"hostBinaries"`
	// HostVariables are the host environment variables secret-env.txt
	// maps; each must be set on the restoring host.
	HostVariables []string `json:"hostVariables"`
	// Ports are the loopback ports the box publishes.
	Ports []int `json:"ports"`
	// KeyFingerprint is the SSH key the backup is bound to, carried in
	// state/.
	KeyFingerprint string `json:"keyFingerprint"`
}

// JSON renders the info, indented.
func (p PortableInfo) JSON() []byte {
	b, _ := json.MarshalIndent(p, "", "  ")
	return append(b, '\n')
}

// Notes renders PORTABLE.md: what the package holds and the steps that
// restore it, the same as docs/backups.md's ("Portable packages").
func (p PortableInfo) Notes() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# hermes-box portable package\n\n")
	fmt.Fprintf(&b, "Made %s on %s/%s by hermes-box %s (smolvm %s) from backup `%s`.\n\n",
		p.Created, p.Source.OS, p.Source.Arch, p.Source.HermesBox, p.Source.Smolvm, p.Backup)
	b.WriteString("**WARNING: this package holds the project's SSH private key (`state/hermes-box-ed25519`,\n" +
		"fingerprint " + p.KeyFingerprint + "). Anyone who has it can log in to a box restored from it. Keep the\n" +
		"package as private as the key itself, and delete copies you no longer need.**\n\n")
	b.WriteString("## Restore on another compatible host (macOS ARM64, or Linux with KVM)\n\n")
	b.WriteString("1. Install a supported smolvm (`hermes-box version` names it; `restore` checks it).\n")
	if len(p.HostVariables) > 0 {
		fmt.Fprintf(&b, "2. Set the host variables secret-env.txt maps: %s.\n", strings.Join(p.HostVariables, ", "))
	} else {
		b.WriteString("2. No host variables are mapped (secret-env.txt is empty or absent).\n")
	}
	b.WriteString("3. From this directory, run the hermes-box for this host:\n\n")
	for _, plat := range sortedKeys(boolKeys(p.HostBinaries)) {
		fmt.Fprintf(&b, "       %-14s %s\n", plat, p.HostBinaries[plat])
	}
	b.WriteString("\n   or, with no binary for this platform, build it (Go 1.26): `make build`, then `bin/hermes-box`.\n")
	fmt.Fprintf(&b, "4. `bin/hermes-box restore backups/%s`\n\n", p.Backup)
	fmt.Fprintf(&b, "restore checks smolvm, the host variables, that the ports %v are free on loopback and the key,\n", p.Ports)
	b.WriteString("before it creates anything.\n")
	return []byte(b.String())
}

func boolKeys(m map[string]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}
