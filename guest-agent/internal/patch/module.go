package patch

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

//go:embed gated_approval.py
var module []byte

//go:embed test_gated_approval.py
var suite []byte

// Module returns the reviewer module installed as tools/gated_approval.py.
func Module() []byte { return append([]byte(nil), module...) }

// ModuleSHA256 is the hex SHA-256 of Module.
func ModuleSHA256() string {
	sum := sha256.Sum256(module)
	return hex.EncodeToString(sum[:])
}
