package backupset

import (
	"strings"

	"github.com/hermes-box/hermes-box/host/internal/backup"
	"github.com/hermes-box/hermes-box/host/internal/chunkstore"
)

// Damaged reports whether e is invalid because chunks it needs were found
// corrupt and set aside (chunkstore.ErrDamaged): the next snapshot stores
// them again when the box still has their content.
func Damaged(e backup.Entry) bool {
	return e.Problem != "" && strings.Contains(e.Problem, chunkstore.ErrDamaged.Error())
}
