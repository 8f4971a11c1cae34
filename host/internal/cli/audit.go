package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/shared/protocol"
)

// verbRunner runs one agent verb in the box. It is the method set of
// relay.Transport, so a relay transport satisfies it as is.
type verbRunner interface {
	Run(ctx context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (exitCode int, err error)
}

// boxRunner returns the transport to the box. TODO(relay): build the SSH
// relay.Transport from the project key, the pinned host key and the
// configured port once the host's box-connection helper lands.
var boxRunner = func(*cobra.Command) (verbRunner, error) {
	return nil, errors.New("cannot reach the box: the relay connection is not wired into this build yet")
}

func newAuditCommand(runner func(*cobra.Command) (verbRunner, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the approval gate's audit log from the box, or verify its hash chain",
		Long: "audit shows every verdict of the gated approval reviewer, as recorded in the box's\n" +
			"hash-chained audit log. --verify checks the chain and names the first altered line.",
		Args: cobra.NoArgs,
	}
	asJSON := cmd.Flags().Bool("json", false, "print the agent's JSON result")
	verify := cmd.Flags().Bool("verify", false, "verify the chain instead of listing the entries")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		argv := []string{"audit", "show"}
		if *verify {
			argv[1] = "verify"
		}
		if *asJSON {
			argv = append(argv, "--json")
		}
		r, err := runner(cmd)
		if err != nil {
			return err
		}
		return runAgentVerb(cmd, r, argv)
	}
	return cmd
}

// runAgentVerb relays argv, copies the verb's stdout to ours, logs its
// events, and passes a non-zero exit status through.
func runAgentVerb(cmd *cobra.Command, r verbRunner, argv []string) error {
	req := protocol.Request{ProtocolVersion: protocol.Version, Argv: argv}
	stderr := cmd.ErrOrStderr()
	code, err := r.Run(cmd.Context(), req, nil, cmd.OutOrStdout(), func(ev protocol.Event) {
		switch ev.Level {
		case protocol.LevelError, protocol.LevelWarn:
			fmt.Fprintf(stderr, "hermes-box: box: %s\n", ev.Message)
		default:
			slog.Debug("box event", "type", ev.Type, "message", ev.Message)
		}
	})
	if err != nil {
		return fmt.Errorf("running %q in the box: %w", argv, err)
	}
	if code != 0 {
		return exitStatus(code)
	}
	return nil
}
