// Package cli is the hermes-box command line: one cobra command per file,
// each a constructor and an action. Data goes to stdout, logs to stderr.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/buildinfo"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// ExitCoder is an error that carries the process exit status, such as the
// status of an agent verb or of `ssh CMD`, passed through unchanged.
type ExitCoder interface {
	error
	ExitCode() int
}

// Run executes the command line and returns the process exit status. An
// error is printed once, after one "hermes-box: " prefix, with its next
// step; under --log-format json it is one error event instead.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return userr.ExitOK
	}
	var st box.ExitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	if ctx.Err() != nil {
		// Ctrl-C: the user knows; a command that left something for the
		// next one says what and how to go on.
		if box.NeedsRecovery(err) || errors.Is(err, box.ErrInterrupted) {
			reportError(root, cmd, stderr, err)
		}
		return userr.ExitInterrupted
	}
	code := userr.Code(err)
	if isUsageError(err) {
		code = userr.ExitUsage
	}
	reportError(root, cmd, stderr, err)
	return code
}

// reportError prints err once, with its plain cause and next step
// (explain): as a JSON event under --log-format json, else as
// "hermes-box: ERR" and "next: STEP". cmd is the command that failed.
func reportError(root, cmd *cobra.Command, stderr io.Writer, err error) {
	if cmd == nil {
		cmd = root
	}
	cause, hint := explain(cmd, err)
	format, _ := root.PersistentFlags().GetString("log-format")
	if format == "json" {
		progress.NewMode(stderr, progress.JSON).Error(errors.New(withCause(cause, err.Error())), hint)
		return
	}
	// The message may quote the box (restore errors, agent output).
	msg := termsafe.Text(withCause(cause, strings.TrimPrefix(err.Error(), "hermes-box: ")))
	fmt.Fprintf(stderr, "hermes-box: %s\n", msg)
	if hint != "" && !strings.Contains(msg, hint) {
		fmt.Fprintf(stderr, "next: %s\n", hint)
	}
}

// isUsageError recognises cobra's errors for an unknown command, flag or
// a wrong number of arguments.
func isUsageError(err error) bool {
	var u *usageErr
	if errors.As(err, &u) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown command ", "unknown flag: ", "unknown shorthand flag: ", "accepts ", "requires at least ",
		"accepts at most ", "requires exactly ", "invalid argument ", "flag needs an argument", "invalid --log-"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// flagError is cobra's FlagErrorFunc: a usage error, and a value that does
// not parse is said plainly (pflag's says "strconv.ParseInt: …").
func flagError(_ *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		err = fmt.Errorf("invalid value %q for --%s: want %s", iv.GetValue(), iv.GetFlag().Name, valueKind(iv.GetFlag().Value.Type()))
	}
	return &usageErr{err}
}

// valueKind says in words what a flag of pflag type typ takes.
func valueKind(typ string) string {
	switch typ {
	case "int", "int64", "int32", "uint", "uint64":
		return "a whole number"
	case "bool":
		return "true or false"
	case "duration":
		return "a duration such as 30s or 5m"
	}
	return "a " + typ
}

// usageErr marks a flag error (cobra's FlagErrorFunc).
type usageErr struct{ error }

func (u *usageErr) Unwrap() error { return u.error }

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "hermes-box",
		Short:         "Run the Hermes Agent in an isolated smolvm microVM",
		Long:          "hermes-box runs the Hermes Agent inside a persistent, isolated smolvm microVM:\nthe agent gets a whole machine and nothing of the host.",
		Version:       buildinfo.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return setupLogging(cmd)
		},
	}
	root.SetVersionTemplate(box.VersionLine() + "\n")
	root.SetHelpCommand(newHelpCommand())
	root.SetFlagErrorFunc(flagError)
	flags := root.PersistentFlags()
	flags.String("log-level", "info", "log level: debug, info, warn or error")
	flags.String("log-format", "text", "log format on stderr: text or json")
	flags.Bool("debug", false, "shorthand for --log-level=debug")
	flags.BoolP("quiet", "q", false, "print only warnings and errors on stderr (no steps or progress); the command's data on stdout is unchanged")
	_ = root.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	root.AddCommand(
		newVersionCommand(),
		newDoctorCommand(),
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
		newAuditCommand(boxAudit),
		newSnapshotCommand(),
		newBackupsCommand(),
		newRestoreCommand(),
		newPackageCommand(),
		newExecutorCommand(),
		newHostKeyCommand(),
		newExitCodesTopic(),
	)
	root.CompletionOptions.DisableDefaultCmd = true
	applyExamples(root)
	return root
}

// setupLogging checks the global log flags, creates the command's progress
// renderer (carried by its context) and sends slog's records through it,
// so no slog line is mixed into the text output.
func setupLogging(cmd *cobra.Command) error {
	flags := cmd.Flags()
	levelName, _ := flags.GetString("log-level")
	format, _ := flags.GetString("log-format")
	debug, _ := flags.GetBool("debug")
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return &usageErr{fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", levelName)}
	}
	quiet, _ := flags.GetBool("quiet")
	if debug {
		level = slog.LevelDebug
	}
	if quiet && (debug || flags.Changed("log-level")) {
		return &usageErr{errors.New("invalid --quiet with --debug or --log-level: --quiet shows warnings and errors only")}
	}
	if quiet {
		level = slog.LevelWarn
	}
	if format != "text" && format != "json" {
		return &usageErr{fmt.Errorf("invalid --log-format %q: want text or json", format)}
	}
	r := progress.New(cmd.ErrOrStderr(), format)
	r.SetQuiet(quiet)
	cmd.SetContext(progress.NewContext(cmd.Context(), r))
	slog.SetDefault(slog.New(progress.NewHandler(r, level)))
	return nil
}

// renderer is the command's progress renderer (setupLogging made it).
func renderer(cmd *cobra.Command) *progress.Renderer {
	if r := progress.FromContext(cmd.Context()); r != nil {
		return r
	}
	format, _ := cmd.Flags().GetString("log-format")
	return progress.New(cmd.ErrOrStderr(), format)
}
