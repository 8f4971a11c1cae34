// Package cli is the hermes-box command line: one cobra command per file,
// each a constructor and an action. Data goes to stdout, logs to stderr.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/hermes-box/hermes-box/host/internal/box"
)

// ExitCoder is an error that carries the process exit status, such as the
// status of an agent verb or of `ssh CMD`, passed through unchanged.
type ExitCoder interface {
	error
	ExitCode() int
}

// Run executes the command line and returns the process exit status.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var st box.ExitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	fmt.Fprintf(stderr, "hermes-box: %v\n", err)
	var ec ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() > 0 {
		return ec.ExitCode()
	}
	return 1
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "hermes-box",
		Short:         "Run the Hermes Agent in an isolated smolvm microVM",
		Long:          "hermes-box runs the Hermes Agent inside a persistent, isolated smolvm microVM:\nthe agent gets a whole machine and nothing of the host.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return setupLogging(cmd)
		},
	}
	flags := root.PersistentFlags()
	flags.String("log-level", "info", "log level: debug, info, warn or error")
	flags.String("log-format", "text", "log format on stderr: text or json")
	flags.Bool("debug", false, "shorthand for --log-level=debug")
	root.AddCommand(
		newVersionCommand(),
		newCompletionCommand(),
		newInitCommand(),
		newStartCommand(),
		newStopCommand(),
		newRestartCommand(),
		newStatusCommand(),
		newSSHCommand(),
		newShellCommand(),
		newLogsCommand(),
		newDestroyCommand(),
		newAuditCommand(boxRunner),
		newSnapshotCommand(),
		newRestoreCommand(),
		newPackageCommand(),
		newExecutorCommand(),
	)
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// setupLogging applies the global log flags to slog's default logger.
func setupLogging(cmd *cobra.Command) error {
	flags := cmd.Flags()
	levelName, _ := flags.GetString("log-level")
	format, _ := flags.GetString("log-format")
	debug, _ := flags.GetBool("debug")
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return fmt.Errorf("invalid --log-level %q: %w", levelName, err)
	}
	if debug {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(cmd.ErrOrStderr(), opts)
	case "json":
		h = slog.NewJSONHandler(cmd.ErrOrStderr(), opts)
	default:
		return fmt.Errorf("invalid --log-format %q: want text or json", format)
	}
	slog.SetDefault(slog.New(h))
	return nil
}
