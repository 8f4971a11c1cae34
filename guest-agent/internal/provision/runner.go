package provision

import "github.com/hermes-box/hermes-box/guest-agent/internal/command"

// The provisioner runs programs through the agent's one command runner.
type (
	// Command is one program the provisioner runs.
	Command = command.Command
	// Output is what a finished command printed.
	Output = command.Output
	// Runner runs commands; the real one starts processes, tests record them.
	Runner = command.Runner
	// CommandError is a command that failed, with the tail of its stderr.
	CommandError = command.CommandError
	// ExecRunner runs commands as child processes in their own process group.
	ExecRunner = command.ExecRunner
)
