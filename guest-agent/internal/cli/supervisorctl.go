package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/shared/health"
)

// SupervisorctlName is the name under which the agent behaves as
// supervisorctl (provision links /usr/local/bin/supervisorctl to it), so
// the reference's in-box commands keep working.
const SupervisorctlName = "supervisorctl"

const supervisorctlUsage = "status [NAME...] | start|stop|restart NAME...|all | pid NAME | tail [-f] NAME: supervisorctl's in-box commands"

// Exit statuses of supervisorctl 4 (LSB): 3 when a program asked about is
// not running, 2 for a bad invocation, 1 for a failed action.
const exitNotRunning = 3

func runSupervisorctl(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		args = []string{"status"}
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprintln(e.Err, "usage: hermes-box-agent "+SupervisorctlName+" "+supervisorctlUsage)
		return nil
	case "status":
		return supervisorctlStatus(ctx, e, rest)
	case "start", "stop", "restart":
		return supervisorctlAction(ctx, e, sub, rest)
	case "pid":
		return supervisorctlPID(ctx, e, rest)
	case "tail":
		return supervisorctlTail(ctx, e, rest)
	}
	return usageError("supervisorctl: *** Unknown syntax: %s (want status, start, stop, restart, pid or tail)", sub)
}

func statusOf(ctx context.Context, e *env) ([]control.Service, error) {
	resp, err := control.Call(ctx, control.Socket(e.root), control.Request{Op: control.OpStatus})
	if err != nil {
		return nil, fmt.Errorf("supervisorctl: %w", err)
	}
	return resp.Services, nil
}

// supervisorctlStatus prints every program, or the named ones, in
// supervisorctl's layout, and exits 3 unless all of them run.
func supervisorctlStatus(ctx context.Context, e *env, names []string) error {
	svcs, err := statusOf(ctx, e)
	if err != nil {
		return err
	}
	notRunning := false
	for _, name := range names {
		if !slices.ContainsFunc(svcs, func(s control.Service) bool { return s.Name == name }) {
			fmt.Fprintf(e.Out, "%s: ERROR (no such process)\n", name)
			notRunning = true
		}
	}
	for _, s := range svcs {
		if len(names) > 0 && !slices.Contains(names, s.Name) {
			continue
		}
		fmt.Fprintf(e.Out, "%-32s %-9s %s\n", s.Name, s.State, s.Description)
		notRunning = notRunning || s.State != health.ServiceRunning
	}
	if notRunning {
		return &exitError{code: exitNotRunning, err: fmt.Errorf("supervisorctl status: not every program is running"), quiet: true}
	}
	return nil
}

// supervisorctlAction starts, stops or restarts each named program (or
// all) and prints supervisorctl's one line per program.
func supervisorctlAction(ctx context.Context, e *env, op string, names []string) error {
	if len(names) == 0 {
		return usageError("supervisorctl %s: Error: %s requires a process name (or all)", op, op)
	}
	failed := false
	for _, name := range names {
		_, err := control.Call(ctx, control.Socket(e.root), control.Request{Op: control.Op(op), Name: name})
		if err != nil {
			fmt.Fprintf(e.Out, "%s: ERROR (%v)\n", name, err)
			failed = true
			continue
		}
		switch op {
		case "stop":
			fmt.Fprintf(e.Out, "%s: stopped\n", name)
		case "restart":
			fmt.Fprintf(e.Out, "%s: stopped\n%s: started\n", name, name)
		default:
			fmt.Fprintf(e.Out, "%s: started\n", name)
		}
	}
	if failed {
		return &exitError{code: 1, err: fmt.Errorf("supervisorctl %s failed", op), quiet: true}
	}
	return nil
}

// supervisorctlPID prints a program's pid (0 when it is not running).
func supervisorctlPID(ctx context.Context, e *env, names []string) error {
	if len(names) != 1 {
		return usageError("supervisorctl pid: want one program name")
	}
	svcs, err := statusOf(ctx, e)
	if err != nil {
		return err
	}
	for _, s := range svcs {
		if s.Name == names[0] {
			fmt.Fprintln(e.Out, strconv.Itoa(s.PID))
			return nil
		}
	}
	fmt.Fprintf(e.Out, "%s: ERROR (no such process)\n", names[0])
	return &exitError{code: 1, err: fmt.Errorf("no such process %q", names[0]), quiet: true}
}

// supervisorctlTail is `tail [-f] NAME [stdout|stderr]`: the end of the
// program's log (stdout and stderr share it), followed with -f.
func supervisorctlTail(ctx context.Context, e *env, args []string) error {
	follow := false
	var rest []string
	for _, a := range args {
		switch {
		case a == "-f":
			follow = true
		case a == "stdout" || a == "stderr":
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) != 1 {
		return usageError("supervisorctl tail: want [-f] NAME [stdout|stderr]")
	}
	largs := []string{rest[0], "-n", "20"}
	if follow {
		largs = append(largs, "-f")
	}
	return runLogs(ctx, e, largs)
}
