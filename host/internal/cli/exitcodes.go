package cli

import "github.com/spf13/cobra"

// exitCodesText is `hermes-box help exit-codes` (README "Exit codes").
const exitCodesText = `hermes-box exits with:

  0    success; for status: the box is healthy
  1    the command failed (the message says why and what to run next);
       for status: the box is unhealthy, or the status could not be read
  2    bad usage: an unknown command, flag or argument
  3    status: the box is stopped
  4    status: there is no box; other commands: run hermes-box init first
  5    status: the box is busy: another hermes-box command (a snapshot, a
       restore, …) holds it and puts it back when it ends
  130  interrupted (Ctrl-C, SIGTERM, SIGHUP, or its output closed)

ssh COMMAND and the agent's verbs pass their own exit status through.`

// newExitCodesTopic is a help topic: `hermes-box help exit-codes`.
func newExitCodesTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "exit-codes",
		Short: "What the exit statuses of hermes-box mean",
		Long:  exitCodesText,
	}
}
