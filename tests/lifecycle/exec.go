package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
)

// Exec runs the hermes-box binary at Bin.
type Exec struct{ Bin string }

// Run runs Bin with args in env; a non-zero exit is a Result, not an error.
func (x Exec) Run(ctx context.Context, env []string, args ...string) (Result, error) {
	cmd := exec.CommandContext(ctx, x.Bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
		return r, nil
	}
	return r, err
}
