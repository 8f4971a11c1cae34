package patch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Command is one subprocess: a program, its arguments, a working directory
// and environment entries added to the agent's own.
type Command struct {
	Name string
	Args []string
	Dir  string
	Env  []string
}

// Runner runs a command to completion and returns its combined output.
type Runner interface {
	Run(ctx context.Context, c Command) ([]byte, error)
}

// ExecRunner runs commands as real child processes.
type ExecRunner struct{}

// Run implements Runner with exec.CommandContext.
func (ExecRunner) Run(ctx context.Context, c Command) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w\n%s", c.Name, strings.Join(c.Args, " "), err, tail(out, 4096))
	}
	return out, nil
}

// tail returns at most the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
