package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// servicesOutput is what `services … --json` prints.
type servicesOutput = protocol.ServicesStatus

func runServices(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError("services: want status, start, stop or restart")
	}
	sub := args[0]
	usage := "[--json] NAME|all"
	if sub == "status" {
		usage = "[--json]"
	}
	fs := newFlags(e, "services "+sub, usage)
	asJSON := fs.Bool("json", false, "print JSON")
	var req control.Request
	switch sub {
	case "status":
		if err := parseFlags(fs, args[1:], 0); err != nil {
			return err
		}
		req.Op = control.OpStatus
	case "start", "stop", "restart":
		if err := parseFlags(fs, args[1:], 1); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return usageError("services %s: want a program name or all", sub)
		}
		req.Op, req.Name = control.Op(sub), fs.Arg(0)
	default:
		return usageError("services: unknown subcommand %q (want status, start, stop or restart)", sub)
	}
	resp, err := control.Call(ctx, control.Socket(e.root), req)
	if resp.Services != nil {
		if perr := printServices(e, resp.Services, *asJSON); perr != nil {
			return perr
		}
	}
	if err != nil {
		return fmt.Errorf("services %s: %w", sub, err)
	}
	return nil
}

func printServices(e *env, svcs []control.Service, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(e.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(servicesOutput{Services: svcs}); err != nil {
			return fmt.Errorf("writing services: %w", err)
		}
		return nil
	}
	for _, s := range svcs {
		if _, err := fmt.Fprintf(e.Out, "%-16s %-9s %s\n", s.Name, s.State, s.Description); err != nil {
			return err
		}
	}
	return nil
}
