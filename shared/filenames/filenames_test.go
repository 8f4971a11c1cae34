package filenames

import (
	"path/filepath"
	"testing"
)

// TestNamesAreSingleComponents: every name is one path component, so
// joining it to its directory stays in that directory.
func TestNamesAreSingleComponents(t *testing.T) {
	for _, n := range []string{StateDir, ImagesDir, BackupsDir, BaseArtifact, BaseArtifactTemp, SSHKey, HostKeysDir, KnownHosts,
		NetworkProofLegacy, NetworkProof("hermes-box"), AuditAnchor, OperationLock, OperationHolder, RestoreJournal, BoxSettings, BuilderInUse} {
		if n == "" || filepath.Base(n) != n || n == "." || n == ".." {
			t.Errorf("%q is not a single path component", n)
		}
	}
}
