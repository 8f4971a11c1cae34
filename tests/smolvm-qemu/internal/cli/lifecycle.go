package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hermes-box/hermes-box/tests/smolvm-qemu/internal/machine"
)

func nameFlag(required bool) flagSpec {
	return flagSpec{long: "name", short: 'n', value: "NAME", required: required}
}

// nameOrDefault is smolvm's default machine name.
func nameOrDefault(a *args) string {
	if n := a.get("name"); n != "" {
		return n
	}
	return "default"
}

var startCmd = command{usage: "smolvm machine start [OPTIONS]", flags: []flagSpec{nameFlag(false)}}

func start(ctx context.Context, argv []string, stdio IO) error {
	a, err := startCmd.parse(argv)
	if err != nil {
		return err
	}
	name := nameOrDefault(a)
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

var stopCmd = command{usage: "smolvm machine stop [OPTIONS]", flags: []flagSpec{nameFlag(false)}}

func stop(ctx context.Context, argv []string, stdio IO) error {
	a, err := stopCmd.parse(argv)
	if err != nil {
		return err
	}
	name := nameOrDefault(a)
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

var deleteCmd = command{usage: "smolvm machine delete [OPTIONS] --name <NAME>", flags: []flagSpec{nameFlag(true), {long: "force", short: 'f'}}}

// del deletes a machine; without --force it asks on stderr and reads the
// answer from stdin, as smolvm does.
func del(ctx context.Context, argv []string, stdio IO) error {
	a, err := deleteCmd.parse(argv)
	if err != nil {
		return err
	}
	name := a.get("name")
	return locked(func(s *machine.Store) error {
		if _, err := s.Load(name); err != nil {
			return err
		}
		if !a.has("force") {
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

var updateCmd = command{usage: "smolvm machine update [OPTIONS] --name <NAME>", flags: []flagSpec{nameFlag(true), {long: "net"}}}

func update(ctx context.Context, argv []string, stdio IO) error {
	a, err := updateCmd.parse(argv)
	if err != nil {
		return err
	}
	name := a.get("name")
	return locked(func(s *machine.Store) error {
		changes, err := s.Update(ctx, name, a.has("net"))
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

var statusCmd = command{usage: "smolvm machine status [OPTIONS]", flags: []flagSpec{nameFlag(false), {long: "json"}}}

func status(ctx context.Context, argv []string, stdio IO) error {
	a, err := statusCmd.parse(argv)
	if err != nil {
		return err
	}
	name := nameOrDefault(a)
	s, err := store()
	if err != nil {
		return err
	}
	r, err := s.Load(name)
	if err != nil {
		if a.has("json") {
			return fmt.Errorf("config operation failed: machine status: machine '%s' not found", name)
		}
		return err
	}
	if a.has("json") {
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

var listCmd = command{usage: "smolvm machine ls [OPTIONS]", flags: []flagSpec{{long: "verbose", short: 'v'}, {long: "json"}}}

func list(ctx context.Context, argv []string, stdio IO) error {
	a, err := listCmd.parse(argv)
	if err != nil {
		return err
	}
	s, err := store()
	if err != nil {
		return err
	}
	rs, err := s.List()
	if err != nil {
		return err
	}
	if a.has("json") {
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

var dataDirCmd = command{usage: "smolvm machine data-dir --name <NAME>", flags: []flagSpec{nameFlag(true)}}

func dataDir(_ context.Context, argv []string, stdio IO) error {
	a, err := dataDirCmd.parse(argv)
	if err != nil {
		return err
	}
	s, err := store()
	if err != nil {
		return err
	}
	if _, err := s.Load(a.get("name")); err != nil {
		return err
	}
	fmt.Fprintln(stdio.Stdout, s.DataDir(a.get("name")))
	return nil
}
