// Package protocol defines the relay contract between the hermes-box host and
// the hermes-box-agent inside the box.
//
// One relay call is one process on the guest. The host writes a single JSON
// Request line on the agent's stdin; for verbs that read data, the raw bytes
// follow that line. The agent writes the verb's data on stdout (a JSON result
// or a raw byte stream), JSON Lines Events on stderr, and exits with the
// verb's status, which the host passes on.
package protocol

// Version is the relay protocol version. It only ever increases; a breaking
// change to any type in this package needs a new version.
//
// History of versions:
//
//	1: 2026-11-22: Request{protocolVersion, argv, options{stdin, logLevel}};
//	   Event{time, type, level, message, step, progress, fields}.
const Version = 1

// MaxRequestBytes bounds the request line, so a peer cannot make the agent
// buffer without limit before the request is even validated.
const MaxRequestBytes = 64 << 10

// Request is the first line a relay call writes on the agent's stdin.
type Request struct {
	// ProtocolVersion must equal Version.
	ProtocolVersion int `json:"protocolVersion"`
	// Argv is the agent verb and its arguments, for example
	// ["health", "--json"]. It is never parsed by a shell.
	Argv []string `json:"argv"`
	// Options tune how the call behaves; the zero value is the default.
	Options Options `json:"options,omitzero"`
}

// Options are per-call settings that are not arguments of the verb.
type Options struct {
	// Stdin says that raw input bytes follow the request line.
	Stdin bool `json:"stdin,omitempty"`
	// LogLevel is the lowest event level the agent should send.
	LogLevel Level `json:"logLevel,omitempty"`
}
