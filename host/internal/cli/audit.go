package cli

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// auditTarget is where the audit log is read from and where the host keeps
// its anchor.
type auditTarget struct {
	box    *agent.Client
	anchor string // the anchor file
}

// boxAudit returns the agent client of the box (over the SSH relay with
// the project key and the pinned host key) and the project's anchor file.
var boxAudit = func(cmd *cobra.Command) (auditTarget, error) {
	b, err := loadBox(cmd)
	if err != nil {
		return auditTarget{}, err
	}
	c, err := box.QuietClient(cmd.Context(), b, "the audit log is read from the running box")
	if err != nil {
		return auditTarget{}, err
	}
	return auditTarget{box: c, anchor: filepath.Join(b.Config().StateDir(), filenames.AuditAnchor)}, nil
}

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
		t, err := target(cmd)
		if err != nil {
			return err
		}
		if *reset {
			aside, err := auditanchor.Reset(cmd.Context(), t.anchor, time.Now())
			if err != nil {
				return err
			}
			slog.Warn("audit anchor reset: this check anchors the log the box holds now", "moved_to", aside,
				"logged_in", filepath.Join(filepath.Dir(t.anchor), auditanchor.ResetLog))
		}
		res, err := box.CheckAudit(cmd.Context(), t.box, t.anchor, !*verify)
		if err != nil {
			return fmt.Errorf("reading the audit log from the box: %w", err)
		}
		if *asJSON {
			err = res.WriteJSON(cmd.OutOrStdout(), !*verify)
		} else {
			err = res.WriteText(cmd.OutOrStdout(), !*verify)
		}
		if err != nil {
			return err
		}
		if !res.OK {
			fmt.Fprintf(cmd.ErrOrStderr(), "hermes-box: %s\n", termsafe.String(res.Err().Error()))
			return box.ExitStatus(1)
		}
		return nil
	}
	return cmd
}
