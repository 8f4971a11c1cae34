package backup

import (
	"errors"
	"fmt"
)

// ErrForeign marks a backup this host's key did not make.
var ErrForeign = errors.New("backup not made with this project's key")

// CheckOrigin refuses a backup that does not record the fingerprint of
// the project's SSH key (fingerprint), unless legacyOK says the user vouches
// for a backup written before fingerprints were recorded. A backup records
// the key whose public half its box trusts: restoring someone else's backup
// boots their code with this project's secrets.
func CheckOrigin(m Manifest, fingerprint string, legacyOK bool) error {
	switch {
	case m.Legacy() && legacyOK:
		return nil
	case m.Legacy():
		return fmt.Errorf("%w: the manifest records no ssh_key_fingerprint; if this is a backup you made before fingerprints were recorded, restore it with --legacy-backup", ErrForeign)
	case m.Fingerprint != fingerprint:
		return fmt.Errorf("%w: SSH key fingerprint mismatch: the backup records %s, this project's key is %s", ErrForeign, m.Fingerprint, fingerprint)
	}
	return nil
}
