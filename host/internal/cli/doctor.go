package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/doctor"
)

func newDoctorCommand() *cobra.Command {
	cmd := boxCommand(&cobra.Command{
		Use:   "doctor",
		Short: "Qualify the installed smolvm on this host with a throwaway machine",
		Long: "doctor creates a throwaway machine, measures each capability hermes-box relies on (one row each, with its\n" +
			"verdict and time) and deletes it. The verdict is remembered for that smolvm binary (path and content hash):\n" +
			"a release outside the supported table that passes is accepted, and a binary with a failing row is refused\n" +
			"by init and start, naming the row. Exits 1 when a row fails.",
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, b *box.Box, _ []string) error {
		rep, err := box.Doctor(cmd.Context(), b)
		if rep != nil {
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				err = firstErr(err, writeIndentedJSON(cmd.OutOrStdout(), rep))
			} else {
				err = firstErr(err, printDoctor(cmd.OutOrStdout(), rep))
			}
		}
		if err == nil && !rep.Passed {
			return box.ExitStatus(1)
		}
		return err
	})
	cmd.Flags().Bool("json", false, "print the report as JSON")
	return cmd
}

func printDoctor(w io.Writer, rep *doctor.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "smolvm %s, doctor run %s, throwaway machine %s\n", rep.Smolvm, rep.Run, rep.Machine)
	fmt.Fprintln(tw, "ROW\tVERDICT\tTIME\tDETAIL")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%.1fs\t%s\n", r.Name, r.Verdict, r.Seconds, r.Detail)
	}
	switch {
	case rep.Passed && !rep.Listed:
		fmt.Fprintf(tw, "smolvm %s is outside the supported table and passed: hermes-box accepts this binary\n", rep.Smolvm)
	case rep.Passed:
		fmt.Fprintf(tw, "smolvm %s passed\n", rep.Smolvm)
	default:
		fmt.Fprintf(tw, "smolvm %s failed: %v; init and start refuse this binary\n", rep.Smolvm, rep.Failed())
	}
	return tw.Flush()
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
