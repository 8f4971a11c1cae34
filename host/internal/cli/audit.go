package cli

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// boxRunner returns the transport to the box: the SSH relay with the
// project key and the pinned host key, on the configured port.
var boxRunner = func(cmd *cobra.Command) (relay.Transport, error) {
	b, err := loadBox(cmd)
	if err != nil {
		return nil, err
	}
	return b.Relay(cmd.Context(), "the audit log is read from the running box")
}

func newAuditCommand(runner func(*cobra.Command) (relay.Transport, error)) *cobra.Command {
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
func runAgentVerb(cmd *cobra.Command, r relay.Transport, argv []string) error {
	stderr := cmd.ErrOrStderr()
	err := box.Call(cmd.Context(), r, func(ev protocol.Event) {
		switch ev.Level {
		case protocol.LevelError, protocol.LevelWarn:
			fmt.Fprintf(stderr, "hermes-box: box: %s\n", ev.Message)
		default:
			slog.Debug("box event", "type", ev.Type, "message", ev.Message)
		}
	}, argv, nil, cmd.OutOrStdout())
	var exit *box.ExitError
	if errors.As(err, &exit) {
		return box.ExitStatus(exit.Code)
	}
	if err != nil {
		return fmt.Errorf("running %q in the box: %w", argv, err)
	}
	return nil
}
