package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/box"
)

// auditTarget is where the audit log is read from and where the host keeps
// its anchor.
type auditTarget struct {
	box    *agent.Client
	anchor string // the anchor file
}

// boxAudit is nil: audit goes through box.Audit like every other command;
// tests set a target of their own (a fake transport, a temp anchor).
var boxAudit func(cmd *cobra.Command) (auditTarget, error)

func newAuditCommand(target func(*cobra.Command) (auditTarget, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the approval gate's audit log from the box, or verify its hash chain",
		Long: "audit shows every verdict of the gated approval reviewer, as recorded in the box's\n" +
			"hash-chained audit log. The host reads the log's bytes, verifies the chain itself and\n" +
			"checks that it extends the head it recorded last time (audit, status and snapshot\n" +
			"record it), so a log rewritten, truncated or replaced in the box is caught.\n" +
			"--verify prints the verdict only; a broken chain names its first bad line and exits 1.\n" +
			"--reset-anchor moves the host's anchor aside first (logged in state/" + auditanchor.ResetLog + "),\n" +
			"so this check anchors whatever the box holds now: only after you have dealt with a break.",
		Args: cobra.NoArgs,
	}
	asJSON := cmd.Flags().Bool("json", false, "print the result as JSON")
	verify := cmd.Flags().Bool("verify", false, "verify the chain instead of listing the entries")
	reset := cmd.Flags().Bool("reset-anchor", false, "move the host's audit anchor aside (logged) and anchor the log the box holds now")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		opts := box.AuditOptions{Reset: *reset, Keep: !*verify}
		res, err := auditResult(cmd, target, opts)
		if err != nil && !errors.Is(err, box.ErrAuditBroken) {
			return err
		}
		// The verdict is printed once, here; a broken chain's error
		// adds only what to do.
		var werr error
		if *asJSON {
			werr = res.WriteJSON(cmd.OutOrStdout(), opts.Keep)
		} else {
			werr = res.WriteText(cmd.OutOrStdout(), opts.Keep)
		}
		if werr != nil {
			return werr
		}
		return err
	}
	return cmd
}

// auditResult is box.Audit, or box.AuditWith on target's client when a test
// set one.
func auditResult(cmd *cobra.Command, target func(*cobra.Command) (auditTarget, error), opts box.AuditOptions) (auditanchor.Result, error) {
	if target == nil {
		b, err := loadBox(cmd)
		if err != nil {
			return auditanchor.Result{}, err
		}
		return box.Audit(cmd.Context(), b, opts)
	}
	t, err := target(cmd)
	if err != nil {
		return auditanchor.Result{}, err
	}
	return box.AuditWith(cmd.Context(), t.box, t.anchor, opts)
}
