package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/machine"
)

// nameOrDefault is smolvm's default machine name.
func nameOrDefault(in *smolvmcli.Invocation) string {
	if n := in.Value("name"); n != "" {
		return n
	}
	return "default"
}

func start(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	name := nameOrDefault(in)
	return locked(func(s *machine.Store) error {
		pid, already, err := s.Start(ctx, name)
		if err != nil {
			return err
		}
		if already {
			fmt.Fprintf(stdio.Stdout, "Machine '%s' already running (PID: %d)\n", name, pid)
		} else {
			fmt.Fprintf(stdio.Stdout, "Machine '%s' started (PID: %d)\n", name, pid)
		}
		return nil
	})
}

func stop(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	name := nameOrDefault(in)
	return locked(func(s *machine.Store) error {
		was, err := s.Stop(ctx, name)
		if err != nil {
			return err
		}
		if was {
			fmt.Fprintf(stdio.Stdout, "Stopped machine '%s'\n", name)
		} else {
			fmt.Fprintf(stdio.Stdout, "Machine '%s' is not running\n", name)
		}
		return nil
	})
}

// del deletes a machine; without --force it asks on stderr and reads the
// answer from stdin, as smolvm does.
func del(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	name := in.Value("name")
	return locked(func(s *machine.Store) error {
		if _, err := s.Load(name); err != nil {
			return err
		}
		if !in.Has("force") {
			fmt.Fprintf(stdio.Stderr, "Delete machine '%s'? [y/N] ", name)
			line, _ := bufio.NewReader(stdio.Stdin).ReadString('\n')
			if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
				fmt.Fprintln(stdio.Stdout, "Cancelled.")
				return nil
			}
		}
		if err := s.Delete(ctx, name); err != nil {
			return err
		}
		fmt.Fprintf(stdio.Stdout, "Deleted machine '%s'\n", name)
		return nil
	})
}

func update(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	name := in.Value("name")
	return locked(func(s *machine.Store) error {
		changes, err := s.Update(ctx, name, in.Has("net"))
		if err != nil {
			return err
		}
		if len(changes) == 0 {
			fmt.Fprintln(stdio.Stdout, "No changes specified.")
			return nil
		}
		fmt.Fprintf(stdio.Stdout, "Updated machine '%s':\n%s\n\nStart with: smolvm machine start --name %s\n", name, strings.Join(changes, "\n"), name)
		return nil
	})
}

func status(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	name := nameOrDefault(in)
	s, err := store()
	if err != nil {
		return err
	}
	r, err := s.Load(name)
	if err != nil {
		if in.Has("json") {
			return fmt.Errorf("config operation failed: machine status: machine '%s' not found", name)
		}
		return err
	}
	if in.Has("json") {
		return printJSON(stdio, s.StatusJSON(ctx, r))
	}
	switch st := s.State(ctx, r); st {
	case machine.Running:
		fmt.Fprintf(stdio.Stdout, "Machine '%s': running (PID: %d)\n", name, r.PID)
	default:
		fmt.Fprintf(stdio.Stdout, "Machine '%s': %s\n", name, st)
	}
	return nil
}

func list(ctx context.Context, in *smolvmcli.Invocation, stdio IO) error {
	s, err := store()
	if err != nil {
		return err
	}
	rs, err := s.List()
	if err != nil {
		return err
	}
	if in.Has("json") {
		out := []map[string]any{}
		for _, r := range rs {
			out = append(out, s.StatusJSON(ctx, r))
		}
		return printJSON(stdio, out)
	}
	fmt.Fprintf(stdio.Stdout, "%-20s %-12s %5s %10s %7s\n%s\n", "NAME", "STATE", "CPUS", "MEMORY", "PORTS", strings.Repeat("-", 58))
	for _, r := range rs {
		fmt.Fprintf(stdio.Stdout, "%-20s %-12s %5d %8dMi %7d\n", r.Name, s.State(ctx, r), r.CPUs, r.MemMiB, len(r.Ports))
	}
	return nil
}

// printJSON prints v as serde_json's to_string_pretty does (2 spaces).
func printJSON(stdio IO, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("config operation failed: serialize json: %w", err)
	}
	_, err = fmt.Fprintf(stdio.Stdout, "%s\n", b)
	return err
}

func dataDir(_ context.Context, in *smolvmcli.Invocation, stdio IO) error {
	s, err := store()
	if err != nil {
		return err
	}
	if _, err := s.Load(in.Value("name")); err != nil {
		return err
	}
	fmt.Fprintln(stdio.Stdout, s.DataDir(in.Value("name")))
	return nil
}
