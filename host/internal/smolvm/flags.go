package smolvm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/hermes-box/hermes-box/shared/pins"
)

// usedFlags are the flags hermes-box passes to smolvm, by subcommand.
// Before it first drives a smolvm binary it checks that the binary's own
// `--help` lists each (checkFlags); every call is checked against this
// list before it runs (declared), so it cannot fall behind the argv
// builders.
var usedFlags = map[string][]string{
	"machine create": {"--name", "--image", "--from", "--cpus", "--mem", "--storage", "--overlay", "-p", "-e", "--secret-env",
		"--net", "--net-backend", "--allow-host", "--outbound-localhost-only"},
	"machine start":    {"--name"},
	"machine stop":     {"--name"},
	"machine delete":   {"--name", "--force"},
	"machine status":   {"--name", "--json"},
	"machine ls":       {"--json"},
	"machine exec":     {"--stream", "-i", "--name", "-e", "--timeout"},
	"machine update":   {"--name", "--net", "--no-net"},
	"machine data-dir": {"--name"},
	"machine shell":    {"--name"},
	"machine cp":       {},
	"pack create":      {"--from-vm", "--smolfile", "--output"},
	// Only on releases with EgressEvents (usedIf).
	"machine egress-events": {"--name", "--limit", "--json"},
}

// usedIf are the subcommands hermes-box uses only on the releases whose
// row says they have them; checkFlags skips them elsewhere.
var usedIf = map[string]func(pins.SmolvmRelease) bool{
	"machine egress-events": func(r pins.SmolvmRelease) bool { return r.EgressEvents },
}

// ErrFlagMissing is wrapped when the smolvm binary's help does not list a
// flag hermes-box passes.
var ErrFlagMissing = errors.New("a flag hermes-box passes is missing from smolvm")

// declared checks that a call uses a known subcommand and only the flags
// usedFlags declares for it (the words before `--`; values never start
// with '-': names, paths, KEY=VALUE and numbers do not).
func declared(args []string) error {
	if len(args) == 1 && args[0] == "--version" {
		return nil
	}
	if len(args) < 2 {
		return fmt.Errorf("smolvm call %q: no subcommand", args)
	}
	verb := args[0] + " " + args[1]
	flags, ok := usedFlags[verb]
	if !ok {
		return fmt.Errorf("smolvm call %q: subcommand %q is not declared in usedFlags", args, verb)
	}
	for _, w := range args[2:] {
		if w == "--" {
			break
		}
		if strings.HasPrefix(w, "-") && !slices.Contains(flags, w) {
			return fmt.Errorf("smolvm call %q: flag %s of %s is not declared in usedFlags", args, w, verb)
		}
	}
	return nil
}

// isHelp says whether a call is `smolvm GROUP SUB --help`.
func isHelp(args []string) bool {
	_, ok := usedFlags[strings.Join(args[:min(2, len(args))], " ")]
	return ok && len(args) == 3 && args[2] == "--help"
}

// helpFlag finds an option at the start of a help line in clap's layout:
// "  -n, --name <NAME>", "      --cpus <CPUS>", "  -i" (short only).
var helpFlag = regexp.MustCompile(`^\s+(?:-([A-Za-z0-9])(?:,\s*|\s|$))?(?:--([A-Za-z0-9][A-Za-z0-9-]*))?`)

// listedFlags returns every option a help text lists, as "--long" and "-x".
func listedFlags(help string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(help, "\n") {
		m := helpFlag.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[1] != "" {
			out["-"+m[1]] = true
		}
		if m[2] != "" {
			out["--"+m[2]] = true
		}
	}
	return out
}

// checkFlags runs `smolvm SUB --help` for every subcommand hermes-box
// uses with flags and checks that each flag it passes is listed. The
// error names the flag, the subcommand and the release.
func (d *Driver) checkFlags(ctx context.Context, version string, r pins.SmolvmRelease) error {
	var errs []error
	for _, verb := range slices.Sorted(maps.Keys(usedFlags)) {
		flags := usedFlags[verb]
		if has, ok := usedIf[verb]; len(flags) == 0 || ok && !has(r) {
			continue
		}
		args := append(strings.Fields(verb), "--help")
		res, err := d.call(ctx, Cmd{Args: args})
		if err == nil && res.ExitCode != 0 {
			err = newError(verb+" --help", "", res)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: smolvm %s has no usable `smolvm %s --help`: %w", ErrFlagMissing, version, verb, err))
			continue
		}
		listed := listedFlags(string(res.Stdout))
		for _, f := range flags {
			if !listed[f] {
				errs = append(errs, fmt.Errorf("%w: smolvm %s does not list %s in `smolvm %s --help`, and hermes-box passes %s to %s",
					ErrFlagMissing, version, f, verb, f, verb))
			}
		}
	}
	return errors.Join(errs...)
}
