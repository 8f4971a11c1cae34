package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

func newStatusCommand() *cobra.Command {
	cmd := boxCommand(&cobra.Command{
		Use:   "status",
		Short: "One line per box (state, CPUs, memory, ports, network, uptime); exit 0 only when healthy",
		Long: "status prints one line per box: its state (healthy, degraded, unhealthy, stopped, missing or busy),\n" +
			"CPUs, memory, published loopback ports, network mode and uptime, then the checks that fail.\n" +
			"--long adds the network proof and every check and service. The exit status says the state:\n" +
			"  0 healthy   1 unhealthy or degraded   3 stopped   4 missing (run hermes-box init)\n" +
			"  5 busy: another hermes-box command (a snapshot, a restore, …) holds the box and puts it back when it ends",
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, b *box.Box, _ []string) error {
		st, err := box.Inspect(cmd.Context(), b)
		if err == nil {
			// A report gathered while Ctrl-C cut its calls short is not
			// the box's state.
			err = cmd.Context().Err()
		}
		if err != nil {
			return err
		}
		if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
			err = writeIndentedJSON(cmd.OutOrStdout(), st)
		} else {
			long, _ := cmd.Flags().GetBool("long")
			// The report's text is the box's: shown, never obeyed.
			safe := termsafe.NewWriter(cmd.OutOrStdout())
			if err = printStatus(safe, st, long); err == nil {
				err = safe.Flush()
			}
		}
		if err != nil {
			return err
		}
		if code := box.StateExitCode(st.State); code != 0 {
			return box.ExitStatus(code)
		}
		return nil
	})
	cmd.Flags().Bool("json", false, "print the status as JSON (a shared/health report plus state, box, network and machine; .state is the box's state)")
	cmd.Flags().BoolP("long", "l", false, "also show the network proof and every check and service")
	return cmd
}

func printStatus(w io.Writer, st *box.Status, long bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	s := st.Box
	fmt.Fprintln(tw, "NAME\tSTATE\tCPUS\tMEMORY\tPORTS\tNETWORK\tUPTIME")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.State, dash(s.CPUs, strconv.Itoa(s.CPUs)),
		dash(s.MemoryMiB, fmt.Sprintf("%d MiB", s.MemoryMiB)), ports(s.Ports), s.Network, uptime(s.UptimeSeconds))
	if err := tw.Flush(); err != nil {
		return err
	}
	// strict and none are proven at every start: their last proof shows.
	if long || st.Network.Mode != "" && st.Network.Mode != "full" {
		fmt.Fprintf(tw, "  network\t%s\t%s\n", st.Network.Mode, st.Network.Summary)
	}
	if st.VMM != nil {
		fmt.Fprintf(tw, "  vmm\t%s\t%s\n", st.VMM.State, st.VMM.Detail)
	}
	codes := make([]string, 0, len(st.Checks))
	for c, ch := range st.Checks {
		// A stopped or missing box has only its machine check: the
		// state says it.
		// The smolvm release is what a start would refuse: shown.
		quiet := (st.State == box.StateStopped || st.State == box.StateMissing) && c != box.CheckRelease
		if long || ch.Status != health.StatusHealthy && !quiet {
			codes = append(codes, string(c))
		}
	}
	slices.Sort(codes)
	for _, c := range codes {
		ch := st.Checks[health.Code(c)]
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", termsafe.Args(c, string(ch.Status), ch.Message)...)
	}
	if long {
		for _, sv := range st.Services {
			fmt.Fprintf(tw, "  service %s\t%s\tpid %d, %d restarts\n", sv.Name, sv.State, sv.PID, sv.Restarts)
		}
	}
	for _, d := range st.Drift {
		fmt.Fprintf(tw, "  settings\t%s\n", termsafe.String(d))
	}
	if st.DriftNext != "" {
		fmt.Fprintf(tw, "  \t%s\n", st.DriftNext)
	}
	if st.Operation != "" {
		fmt.Fprintf(tw, "  operation\t%s\n", st.Operation)
	}
	if next := statusNext(st); next != "" {
		fmt.Fprintln(tw, next)
	}
	return tw.Flush()
}

// statusNext is the line after a state that is not healthy: what to run.
func statusNext(st *box.Status) string {
	if _, bad := st.Checks[box.CheckRelease]; bad {
		return "next: hermes-box doctor (qualifies this smolvm on this host), or install the release the smolvm-release line names"
	}
	switch st.State {
	case box.StateStopped:
		return "start it with: hermes-box start"
	case box.StateMissing:
		return "create it with: hermes-box init (or hermes-box restore BACKUP)"
	case box.StateBusy:
		return "in progress: " + operationName(st.Operation) + "; it puts the box back when it ends (run hermes-box status again then)"
	case box.StateUnhealthy, box.StateDegraded:
		return "next: hermes-box logs (the gateway's log), hermes-box status --long (every check); hermes-box restart restarts every service"
	}
	return ""
}

// operationName is the command of a holder line ("pid N: hermes-box
// snapshot x (since …)" → "hermes-box snapshot x").
func operationName(holder string) string {
	_, cmd, ok := strings.Cut(holder, ": ")
	if !ok {
		return holder
	}
	if i := strings.LastIndex(cmd, " (since "); i >= 0 {
		cmd = cmd[:i]
	}
	return cmd
}

func dash(n int, s string) string {
	if n == 0 {
		return "-"
	}
	return s
}

func ports(ps []int) string {
	if len(ps) == 0 {
		return "-"
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return strings.Join(out, ",")
}

func uptime(secs int64) string {
	if secs <= 0 {
		return "-"
	}
	d := time.Duration(secs) * time.Second
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}
