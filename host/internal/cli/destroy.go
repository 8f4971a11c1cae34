package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/prompt"
	"github.com/hermes-box/hermes-box/host/internal/userr"
)

func newDestroyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "destroy [--yes]",
		Short: "Delete the box and any builder; keep keys, images and backups",
		Long: "destroy deletes the box's machine (its root file system and /workspace: everything not in a\n" +
			"backup) and any builder. It says what is lost and when the box's last good backup was taken;\n" +
			"on a terminal it asks first, elsewhere it needs --yes (--force is the same). Keys, images and backups are kept.",
		Args: cobra.NoArgs,
		RunE: destroyAction,
	}
	// --yes is "do not ask" here as in hostkey repin; --force, its name
	// before, stays for the scripts and messages that use it.
	cmd.Flags().BoolP("yes", "y", false, "do not ask: really delete the machines")
	cmd.Flags().Bool("force", false, "the same as --yes")
	return cmd
}

func destroyAction(cmd *cobra.Command, _ []string) error {
	b, err := loadBox(cmd)
	if err != nil {
		return err
	}
	loss := lossLine(cmd.Context(), b)
	yes, _ := cmd.Flags().GetBool("yes")
	force, _ := cmd.Flags().GetBool("force")
	if !yes && !force {
		agreed, asked, err := prompt.Confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), "destroy "+b.Config().MachineName+"? "+loss+".")
		switch {
		case err != nil:
			return err
		case !asked:
			return userr.Usage("destroy needs --yes (or --force) off a terminal (%s)", loss)
		case !agreed:
			return &userr.Error{Err: fmt.Errorf("destroy declined: nothing destroyed"), Code: userr.ExitFailure,
				Next: "nothing: the box is as it was (hermes-box destroy --yes deletes it without asking)"}
		}
	}
	deleted, err := box.Destroy(cmd.Context(), b)
	if err != nil {
		return err
	}
	c := b.Config()
	if len(deleted) == 0 {
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "nothing to destroy: there is no machine %s or %s\n", c.MachineName, c.BuilderName)
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "destroyed %s: %s; kept %s, %s and the SSH key %s\n",
		strings.Join(deleted, " and "), loss, c.ImagesDir(), c.BackupsDir(), c.SSHKeyPath())
	return err
}

// lossLine says what destroying the box loses and what is left to restore.
func lossLine(ctx context.Context, b *box.Box) string {
	lost := "its root file system and /workspace are lost"
	e, ok := box.LastGoodBackup(ctx, b)
	if !ok {
		return lost + ", and there is no backup of " + b.Config().MachineName + " (hermes-box snapshot takes one)"
	}
	taken := "at an unknown time"
	if !e.Created.IsZero() {
		taken = fmt.Sprintf("%s (%s ago)", e.Created.Local().Format(time.DateTime), roughly(time.Since(e.Created)))
	}
	return fmt.Sprintf("%s since its last good backup %s, taken %s (hermes-box restore %s brings it back)",
		lost, e.Name, taken, strings.TrimSuffix(e.Name, ".hermesbox"))
}

// roughly is d in the largest whole unit: minutes, hours or days.
func roughly(d time.Duration) string {
	unit, n := "minute", int(d/time.Minute)
	switch {
	case d >= 48*time.Hour:
		unit, n = "day", int(d/(24*time.Hour))
	case d >= 2*time.Hour:
		unit, n = "hour", int(d/time.Hour)
	}
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
