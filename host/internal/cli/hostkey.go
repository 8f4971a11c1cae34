package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/prompt"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

func newHostKeyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hostkey",
		Short: "The box's pinned SSH host key",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	repin := boxCommand(&cobra.Command{
		Use:   "repin [--yes]",
		Short: "Read the box's SSH host key out of band and pin it",
		Long: "repin reads the box's SSH host key through smolvm (the agent's hostkeys verb run by smolvm\n" +
			"machine exec: no network, so nothing else listening on the SSH port can answer) and, when it\n" +
			"differs from the pinned key, shows both fingerprints and pins it: on a terminal after you agree,\n" +
			"elsewhere with --yes. A stopped box is started for the read.",
		Args: cobra.NoArgs,
	}, hostKeyRepinAction)
	repin.Flags().Bool("yes", false, "pin the key read out of band without asking")
	cmd.AddCommand(repin)
	return cmd
}

func hostKeyRepinAction(cmd *cobra.Command, b *box.Box, _ []string) error {
	yes, _ := cmd.Flags().GetBool("yes")
	confirm := func(old, new string) (bool, error) {
		if yes {
			return true, nil
		}
		q := fmt.Sprintf("the box's host key, read out of band, is %s; the pinned one is %s. Pin the new one?", new, orNone(old))
		ok, asked, err := prompt.Confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), q)
		if err == nil && !asked {
			err = userr.Usage("the box's host key is %s, the pinned one %s: pass --yes to pin it off a terminal", new, orNone(old))
		}
		return ok, err
	}
	ch, err := box.RepinHostKey(cmd.Context(), b, confirm)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch {
	case ch.Changed:
		_, err = fmt.Fprintf(out, "pinned %s (was %s)\n", ch.New, orNone(ch.Old))
	case ch.Old == ch.New:
		_, err = fmt.Fprintf(out, "the pinned host key %s is the box's: nothing to change\n", ch.New)
	default:
		err = userr.WithCode(errors.New("the host key was not re-pinned"), userr.ExitFailure)
	}
	return err
}

func orNone(fp string) string {
	if fp == "" {
		return "none"
	}
	return fp
}
