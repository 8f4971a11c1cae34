//go:build !hbxrelease

// Package auditchaintest writes gate audit logs for tests: valid chains as
// the reviewer writes them, one JSON line an entry, each hash over the
// entry's exact bytes and each entry naming the previous hash.
package auditchaintest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hermes-box/hermes-box/shared/auditchain"
)

// Entry is what a test chooses of one entry; its sequence number, previous
// hash, confidence (0.9) and command hash (the sequence number) are set by
// Lines.
type Entry struct {
	Command, Decision, Risk, Reason, Time string
}

// Lines is a valid chain of entries, a line each (without its newline).
func Lines(entries ...Entry) []string {
	lines := make([]string, len(entries))
	prev := auditchain.Genesis
	for i, e := range entries {
		command, err := json.Marshal(e.Command)
		if err != nil {
			panic(err) // a string always marshals
		}
		body := fmt.Sprintf(`{"command":%s,"command_sha256":"%064x","confidence":0.9,"decision":"%s","prev":"%s","reason":"%s","risk":"%s","seq":%d,"time":"%s"}`,
			command, i+1, e.Decision, prev, e.Reason, e.Risk, i+1, e.Time)
		sum := sha256.Sum256([]byte(body))
		prev = hex.EncodeToString(sum[:])
		lines[i] = `{"entry":` + body + `,"hash":"` + prev + `"}`
	}
	return lines
}

// Log is the chain of entries as a file: every line ends in a newline.
func Log(entries ...Entry) string {
	if len(entries) == 0 {
		return ""
	}
	return strings.Join(Lines(entries...), "\n") + "\n"
}

// Decisions is a log of one entry per decision: the command is
// fmt.Sprintf(command, seq), the risk as given, reason "r" and time "t".
func Decisions(command, risk string, decisions ...string) string {
	entries := make([]Entry, len(decisions))
	for i, d := range decisions {
		entries[i] = Entry{Command: fmt.Sprintf(command, i+1), Decision: d, Risk: risk, Reason: "r", Time: "t"}
	}
	return Log(entries...)
}
