package patch

import "github.com/hermes-box/hermes-box/guest-agent/internal/command"

// The patcher runs Python (py_compile and the reviewer suite) through the
// agent's one command runner and its environment policy.
type (
	// Command is one subprocess.
	Command = command.Command
	// Runner runs a command to completion.
	Runner = command.Runner
	// ExecRunner runs commands as real child processes.
	ExecRunner = command.ExecRunner
)
