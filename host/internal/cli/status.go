package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/shared/health"
)

func newStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the machine's state, the listener check and the agent's health",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBox(cmd)
			if err != nil {
				return err
			}
			st, err := b.Status(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printStatus(cmd.OutOrStdout(), b.Config().MachineName, st)
		},
	}
	cmd.Flags().Bool("json", false, "print the status as JSON (a shared/health report plus the machine)")
	return cmd
}

func printStatus(w io.Writer, machine string, st *box.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "box\t%s\t%s\n", machine, st.Status)
	codes := make([]string, 0, len(st.Checks))
	for c := range st.Checks {
		codes = append(codes, string(c))
	}
	slices.Sort(codes)
	for _, c := range codes {
		ch := st.Checks[health.Code(c)]
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c, ch.Status, ch.Message)
	}
	for _, s := range st.Services {
		fmt.Fprintf(tw, "  service %s\t%s\tpid %d, %d restarts\n", s.Name, s.State, s.PID, s.Restarts)
	}
	return tw.Flush()
}
