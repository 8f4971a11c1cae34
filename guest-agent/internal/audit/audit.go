// Package audit is the gate's audit log as the agent sees it: the chain's
// format and verifier live in shared/auditchain, which the host uses too.
package audit

import "github.com/hermes-box/hermes-box/shared/auditchain"

// The chain's types and its verifier.
type (
	Entry      = auditchain.Entry
	Record     = auditchain.Record
	ChainError = auditchain.ChainError
)

// Genesis is the "prev" of the first entry.
var Genesis = auditchain.Genesis

// Verify is auditchain.Verify.
var Verify = auditchain.Verify
