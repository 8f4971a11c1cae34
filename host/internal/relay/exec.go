package relay

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// AgentPath is where the agent lives in the box.
const AgentPath = "/usr/local/sbin/hermes-box-agent"

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
	// Agent is the agent's path in the box; "" means AgentPath.
	Agent string
}

var _ Transport = (*Exec)(nil)

// Run implements Transport.
func (e *Exec) Run(ctx context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (int, error) {
	verb := "request"
	if len(req.Argv) > 0 {
		verb = fmt.Sprintf("%q", req.Argv[0])
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
	agent := e.Agent
	if agent == "" {
		agent = AgentPath
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		readEvents(pr, onEvent)
		close(done)
	}()
	res, err := e.Execer.Exec(ctx, smolvm.ExecSpec{
		Name: e.Machine, Argv: []string{agent, "relay"}, Stream: true, Stdin: in, Stdout: stdout, Stderr: pw,
	})
	pw.Close()
	<-done
	if err != nil {
		// Only the verb is named: arguments stay out of error messages.
		return -1, fmt.Errorf("relaying %s through smolvm exec on %s: %w", verb, e.Machine, err)
	}
	return res.ExitCode, nil
}
