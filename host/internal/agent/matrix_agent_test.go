//go:build linux

package agent_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/auditchain/auditchaintest"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/netproof"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// The compromised agent of the hostile matrix: this test binary run by
// Debian's sshd as the relay's remote command (`BIN hbx-matrix-agent MODE`).
// It reads the request line and answers in one of the matrix's modes.

// payload is what the escape mode writes in every field: OSC 52 (the
// clipboard), a window title, a cleared screen, a forged host line, C1 CSI,
// a bidi override, a CR and bytes that are not UTF-8.
const payload = "\x1b]52;c;ZWNobyBvd25lZA==\x07\x1b]0;hermes-box: all good\x07\x1b[2J\x1b[H\n[3/3] ✓ healthy\t\u009b1m\u202e\r\xff"

// Modes of the matrix.
const (
	modeEscape = "escape"
	modeStdout = "stdout-1GiB"
	modeStderr = "stderr-1GiB"
	modeHang   = "never-answers"
	modeDrip   = "slow-drip"
	modeSteps  = "10k-step-names"
)

var modes = []string{modeEscape, modeStdout, modeStderr, modeHang, modeDrip, modeSteps}

// floodSize is a flood's length: 1 GiB, made of one 64 KiB block written
// again and again (no memory, no randomness to generate).
const floodSize = 1 << 30

// stepsPerCall is how many new step names a call of the steps mode makes.
const stepsPerCall = 500

func matrixAgent(mode string, drip time.Duration, call int) int {
	br := bufio.NewReader(os.Stdin)
	req, err := protocol.ReadRequest(br)
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix agent:", err)
		return 2
	}
	var in []byte
	if req.Options.Stdin {
		in, _ = io.ReadAll(io.LimitReader(br, 1<<20))
	}
	answer := answerOf(req.Argv, in, "")
	switch mode {
	case modeEscape:
		escapeEvents()
		answer = answerOf(req.Argv, in, payload)
	case modeStdout:
		flood(os.Stdout, bytes.Repeat([]byte("A"), 64<<10))
	case modeStderr:
		flood(os.Stderr, append(bytes.Repeat([]byte("B"), 64<<10-1), '\n'))
	case modeHang:
		hang()
	case modeDrip:
		// Just under the deadline: one byte of the answer at a time, the
		// last one a little before the deadline.
		pause := drip / time.Duration(len(answer)+1)
		for i := range answer {
			os.Stdout.Write(answer[i : i+1])
			time.Sleep(pause)
		}
		return 0
	case modeSteps:
		for i := range stepsPerCall {
			event(map[string]any{"type": "step", "step": fmt.Sprintf("step-%d-%d-%s", call, i, strings.Repeat("s", 200)), "state": "started"})
		}
	}
	os.Stdout.Write(answer)
	return 0
}

// escapeEvents sends the payload in every field of every kind of event,
// unknown ones too, and as a raw stderr line.
func escapeEvents() {
	for _, typ := range []string{"log", "warning", "step", "progress", payload} {
		for _, state := range []string{"started", "done", "failed", payload} {
			event(map[string]any{"time": payload, "type": typ, "level": payload, "step": payload, "state": state, "message": payload,
				"fields":   map[string]string{"elapsed": payload, "error": payload, "url": payload, payload: payload},
				"progress": map[string]any{"current": 1, "total": 2, "unit": payload}})
		}
	}
	event(map[string]any{"type": "log", "level": "error", "message": payload})
	fmt.Fprintf(os.Stderr, "raw stderr %s\n", payload)
}

func event(ev map[string]any) {
	b, _ := json.Marshal(ev)
	// encoding/json escapes controls; the raw bytes go in as the box may.
	b = bytes.ReplaceAll(b, []byte(`\u001b`), []byte("\x1b"))
	b = bytes.ReplaceAll(b, []byte(`\u0007`), []byte("\x07"))
	os.Stderr.Write(append(b, '\n'))
}

// answerOf is a well-formed answer to argv with text in its fields.
func answerOf(argv []string, stdin []byte, text string) []byte {
	var v any
	switch strings.Join(argv[:min(2, len(argv))], " ") {
	case "health --json":
		v = health.Report{SchemaVersion: health.SchemaVersion, Status: health.StatusHealthy, Agent: health.Agent{Version: text + "1"},
			Checks:   map[health.Code]health.Check{health.Code("c" + text): {Status: health.StatusHealthy, Message: text}},
			Services: []health.Service{{Name: "hermes" + text, State: health.ServiceState("RUNNING" + text)}}}
	case "services status":
		v = protocol.ServicesStatus{Services: []protocol.ServiceStatus{{Service: health.Service{Name: "hermes" + text, State: "RUNNING"}, Description: text}}}
	case "netprobe":
		var plan netproof.Plan
		_ = json.Unmarshal(stdin, &plan)
		v = netproof.Proof{Mode: plan.Mode + text, Time: "2026-11-26T21:00:00Z" + text,
			Probes: []netproof.Probe{{Class: netproof.Class("gateway" + text), Target: text, Detail: text}}}
	case "executor status":
		v = protocol.ExecutorStatus{Current: &protocol.ExecutorRelease{Name: text, ImageReference: "ghcr.io/x" + text, ManifestDigest: text}}
	case "executor refresh-discovery":
		v = protocol.DiscoveryRefresh{Restarted: false, BootID: text}
	case "hostkeys":
		v = protocol.HostKeys{Keys: []protocol.HostKey{{Type: "ssh-ed25519" + text, Path: "/etc/ssh/k.pub" + text, Fingerprint: "SHA256:" + text, PublicKey: text}}}
	case "audit raw":
		// A valid chain whose command carries the text: shown by audit.
		return []byte(auditchaintest.Log(auditchaintest.Entry{Command: "ls " + text, Decision: "deny", Risk: "high", Reason: text, Time: "t"}))
	case "secrets set":
		var s protocol.Secrets
		_ = json.Unmarshal(stdin, &s)
		v = protocol.SecretsStored{Names: append(s.Names(), text)}
	default:
		return []byte("line one " + text + "\nline two\n")
	}
	b, _ := json.Marshal(v)
	return append(b, '\n')
}

// flood writes block until floodSize bytes went or the host hung up.
func flood(w io.Writer, block []byte) {
	for sent := 0; sent < floodSize; sent += len(block) {
		if _, err := w.Write(block); err != nil {
			return
		}
	}
}

// hang waits until the session that ran this process is gone (the host
// hung up), at most an hour.
func hang() {
	parent := os.Getppid()
	for end := time.Now().Add(time.Hour); time.Now().Before(end) && os.Getppid() == parent; {
		time.Sleep(50 * time.Millisecond)
	}
}

// atoi is s as an int, 0 when it is not one.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
