package cli

import (
	"fmt"
	"strings"
)

// flagSpec describes one option the way clap declares it.
type flagSpec struct {
	long     string
	short    byte   // 0: none
	value    string // value name, "" for a switch
	repeat   bool
	required bool
}

func (f flagSpec) display() string {
	s := "--" + f.long
	if f.value != "" {
		s += " <" + f.value + ">"
	}
	return s
}

// command is a subcommand's grammar.
type command struct {
	usage      string // after "Usage: "
	flags      []flagSpec
	positional int  // how many positional arguments it takes
	trailing   bool // takes "-- CMD..."
	needsTrail bool
}

// args is a parsed command line.
type args struct {
	vals  map[string][]string
	pos   []string
	trail []string
}

func (a *args) get(long string) string {
	if v := a.vals[long]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func (a *args) has(long string) bool { _, ok := a.vals[long]; return ok }

// usageError is a command-line error, printed as clap prints it (exit 2).
type usageError struct {
	msg, usage string
}

func (e *usageError) Error() string {
	return fmt.Sprintf("error: %s\n\nUsage: %s\n\nFor more information, try '--help'.", e.msg, e.usage)
}

// parse checks argv against the grammar as clap does: long options with a
// separate or '=' value, short options with a separate or attached value,
// no repeats of single-valued options, required options present.
func (c *command) parse(argv []string) (*args, error) {
	a := &args{vals: map[string][]string{}}
	bad := func(format string, v ...any) error { return &usageError{fmt.Sprintf(format, v...), c.usage} }
	for i := 0; i < len(argv); i++ {
		arg := argv[i]
		if arg == "--" {
			if !c.trailing {
				return nil, bad("unexpected argument '--' found")
			}
			a.trail = argv[i+1:]
			break
		}
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			if len(a.pos) >= c.positional {
				return nil, bad("unexpected argument '%s' found", arg)
			}
			a.pos = append(a.pos, arg)
			continue
		}
		f, inline, hasInline, err := c.lookup(arg)
		if err != nil {
			return nil, err
		}
		if a.has(f.long) && !f.repeat {
			return nil, bad("the argument '%s' cannot be used multiple times", f.display())
		}
		if f.value == "" {
			if hasInline {
				return nil, bad("unexpected value '%s' for '--%s' found; no more were expected", inline, f.long)
			}
			a.vals[f.long] = append(a.vals[f.long], "true")
			continue
		}
		if !hasInline {
			if i+1 >= len(argv) || (strings.HasPrefix(argv[i+1], "-") && len(argv[i+1]) > 1) {
				return nil, bad("a value is required for '%s' but none was supplied", f.display())
			}
			i++
			inline = argv[i]
		}
		a.vals[f.long] = append(a.vals[f.long], inline)
	}
	for _, f := range c.flags {
		if f.required && !a.has(f.long) {
			return nil, &usageError{"the following required arguments were not provided:\n  " + f.display(), c.usage}
		}
	}
	if len(a.pos) < c.positional {
		return nil, &usageError{"the following required arguments were not provided:\n  <ARGS>", c.usage}
	}
	if c.needsTrail && len(a.trail) == 0 {
		return nil, &usageError{"the following required arguments were not provided:\n  <COMMAND>...", c.usage}
	}
	return a, nil
}

// lookup finds the flag of one argument and any value attached to it.
func (c *command) lookup(arg string) (flagSpec, string, bool, error) {
	if strings.HasPrefix(arg, "--") {
		name, val, hasVal := strings.Cut(arg[2:], "=")
		for _, f := range c.flags {
			if f.long == name {
				return f, val, hasVal, nil
			}
		}
		return flagSpec{}, "", false, &usageError{fmt.Sprintf("unexpected argument '%s' found", arg), c.usage}
	}
	for _, f := range c.flags {
		if f.short != 0 && arg[1] == f.short {
			if len(arg) == 2 {
				return f, "", false, nil
			}
			if f.value == "" {
				break
			}
			return f, strings.TrimPrefix(arg[2:], "="), true, nil
		}
	}
	return flagSpec{}, "", false, &usageError{fmt.Sprintf("unexpected argument '%s' found", arg), c.usage}
}
