package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// MachineExecer runs a command in a machine; *smolvm.Driver is one.
type MachineExecer interface {
	Exec(ctx context.Context, s smolvm.ExecSpec) (smolvm.Result, error)
}

// Exec is the transport for a box whose sshd does not run yet (the builder
// during init, a machine in restore mode): `smolvm machine exec --stream -i
// --name N -- /usr/local/sbin/hermes-box-agent relay`. The protocol is the
// SSH transport's: the request line and then the input on stdin (smolvm 1.0.4
// forwards stdin only with -i), data on stdout, events on stderr, the verb's
// exit status. smolvm's own failures ("Error: …", status 1) arrive as a raw
// stderr event and status 1.
type Exec struct {
	Machine string
	Execer  MachineExecer
	// Agent is the agent's path in the box; "" means boxlayout.AgentPath.
	Agent string
	// Direct runs the verb as `agent VERB ARGS…` instead of through `agent
	// relay`: for the builder-only verbs (provision) that the agent refuses
	// through the relay, as it refuses them to SSH callers. The argv still
	// travels as an argument vector (no shell), events still arrive as JSON
	// Lines on stderr; there is no request line and no stdin.
	Direct bool
	// Env holds KEY=VALUE pairs for the agent's environment (smolvm exec
	// -e, so they are in argv: never secrets).
	Env []string
	// HoldOutput is for a smolvm release whose `machine exec -i` is not
	// safe with large input (pins.SmolvmRelease.LargeExecStdin false):
	// before 1.8.1 smolvm's client stops reading the guest's output while
	// it writes input, and aborts when a write makes no progress for 10 s.
	// A call with input then runs `agent relay --hold-output`, so the agent
	// writes nothing until the verb has returned.
	HoldOutput bool
	// Timeout, when positive, has smolvm end the verb in the box after it
	// (exec --timeout): a probe that hangs in the box ends there too, not
	// only on the host.
	Timeout time.Duration
}

var _ Transport = (*Exec)(nil)

// Run implements Transport.
func (e *Exec) Run(ctx context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (int, error) {
	verb := "request"
	if len(req.Argv) > 0 {
		verb = fmt.Sprintf("%q", req.Argv[0])
	}
	if e.Direct {
		return e.runDirect(ctx, req, stdin, stdout, onEvent, verb)
	}
	if stdin != nil {
		req.Options.Stdin = true
	}
	var line bytes.Buffer
	if err := protocol.WriteRequest(&line, req); err != nil {
		return -1, fmt.Errorf("relaying %s through smolvm exec on %s: %w", verb, e.Machine, err)
	}
	in := io.Reader(&line)
	if stdin != nil {
		in = io.MultiReader(&line, stdin)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	argv := []string{e.agent(), "relay"}
	if stdin != nil && e.HoldOutput {
		argv = append(argv, "--hold-output")
	}
	// A release without LargeExecStdin says so on stderr when it gives up
	// on the input; newer ones never print it.
	stalled := false
	code, err := e.exec(ctx, argv, in, stdout, func(ev protocol.Event) {
		if ev.Fields[RawSourceField] == RawSourceStderr && strings.Contains(ev.Message, stalledInputMessage) {
			stalled = true
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}, verb)
	if err == nil && code != 0 && stalled && stdin != nil {
		return -1, fmt.Errorf("relaying %s through smolvm exec on %s: %w", verb, e.Machine, errStalledInput)
	}
	return code, err
}

// stalledInputMessage is in the error a smolvm release without
// LargeExecStdin prints when a write of `machine exec -i` input made no
// progress for its 10 s write timeout (EAGAIN on the agent socket).
const stalledInputMessage = "Resource temporarily unavailable"

// errStalledInput is a relay call whose input smolvm gave up on.
var errStalledInput = errors.New("smolvm aborted the input stream: the guest took none of it for 10 s and this smolvm release " +
	"ends `machine exec -i` then (fixed in smolvm 1.8.1); retry, or install a release that streams large input: " +
	pins.SmolvmInstallCommand(pins.SmolvmRecommended))

// runDirect runs `agent VERB ARGS…` with the request's argv.
func (e *Exec) runDirect(ctx context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event), verb string) (int, error) {
	if stdin != nil {
		return -1, fmt.Errorf("relaying %s through smolvm exec on %s: a direct verb reads no input", verb, e.Machine)
	}
	if err := req.Validate(); err != nil {
		return -1, fmt.Errorf("relaying %s through smolvm exec on %s: %w", verb, e.Machine, err)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	return e.exec(ctx, append([]string{e.agent()}, req.Argv...), nil, stdout, onEvent, verb)
}

func (e *Exec) agent() string {
	if e.Agent == "" {
		return boxlayout.AgentPath
	}
	return e.Agent
}

// exec runs argv in the machine, streaming stderr's events to onEvent.
func (e *Exec) exec(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event), verb string) (int, error) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var stderrErr error
	go func() {
		if stderrErr = readEvents(pr, onEvent, stderrLimit(ctx)); stderrErr != nil {
			stop(stderrErr)
			io.Copy(io.Discard, pr)
		}
		close(done)
	}()
	res, err := e.Execer.Exec(ctx, smolvm.ExecSpec{
		Name: e.Machine, Argv: argv, Env: e.Env, Stream: true, Timeout: e.Timeout, Stdin: stdin, Stdout: stdout, Stderr: pw,
	})
	pw.Close()
	<-done
	if stderrErr != nil {
		err = stderrErr
	}
	if err != nil {
		// Only the verb is named: arguments stay out of error messages.
		return -1, fmt.Errorf("relaying %s through smolvm exec on %s: %w", verb, e.Machine, err)
	}
	return res.ExitCode, nil
}
