package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/auditanchor"
	"github.com/hermes-box/hermes-box/host/internal/box"
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
	c, err := b.QuietClient(cmd.Context(), "the audit log is read from the running box")
	if err != nil {
		return auditTarget{}, err
	}
	return auditTarget{box: c, anchor: filepath.Join(b.Config().StateDir(), auditanchor.FileName)}, nil
}

func newAuditCommand(target func(*cobra.Command) (auditTarget, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the approval gate's audit log from the box, or verify its hash chain",
		Long: "audit shows every verdict of the gated approval reviewer, as recorded in the box's\n" +
			"hash-chained audit log. The host reads the log's bytes, verifies the chain itself and\n" +
			"checks that it extends the head it recorded last time (audit, status and snapshot\n" +
			"record it), so a log rewritten, truncated or replaced in the box is caught.\n" +
			"--verify prints the verdict only; a broken chain names its first bad line and exits 1.",
		Args: cobra.NoArgs,
	}
	asJSON := cmd.Flags().Bool("json", false, "print the result as JSON")
	verify := cmd.Flags().Bool("verify", false, "verify the chain instead of listing the entries")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		t, err := target(cmd)
		if err != nil {
			return err
		}
		res, err := box.CheckAudit(cmd.Context(), t.box, t.anchor)
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
