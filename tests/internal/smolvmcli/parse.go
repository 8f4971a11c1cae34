package smolvmcli

import (
	"strconv"
	"strings"
	"time"
)

// Parse parses argv (without the program name) against the 1.0.4 grammar.
func Parse(argv []string) (*Invocation, error) { return ParseFor(V104, argv) }

// ParseFor parses argv against the grammar of release.
func ParseFor(release string, argv []string) (*Invocation, error) {
	cmds, err := Grammar(release)
	if err != nil {
		return nil, err
	}
	if len(argv) == 1 && (argv[0] == "--version" || argv[0] == "-V") {
		return &Invocation{Version: true}, nil
	}
	cmd, rest, err := lookup(cmds, argv)
	if err != nil {
		return nil, err
	}
	// clap answers --help (or -h) wherever it stands among the options,
	// before it checks anything else.
	for _, w := range rest {
		if w == "--" {
			break
		}
		if w == "--help" || w == "-h" {
			return &Invocation{Help: true, Command: cmd}, nil
		}
	}
	in := &Invocation{Command: cmd, Values: map[string][]string{}, Bools: map[string]bool{}}
	if err := in.parseOptions(rest); err != nil {
		return nil, err
	}
	return in, in.check()
}

// lookup finds the subcommand named by the first two words.
func lookup(cmds []Command, argv []string) (*Command, []string, error) {
	if len(argv) == 0 {
		return nil, nil, usage("'smolvm' requires a subcommand but one was not provided")
	}
	group := canonical(argv[0])
	if group != "machine" && group != "pack" && group != "serve" && group != "config" {
		return nil, nil, usage("unrecognized subcommand '%s'", argv[0])
	}
	if len(argv) < 2 {
		return nil, nil, usage("'smolvm %s' requires a subcommand but one was not provided", group)
	}
	sub := canonical(argv[1])
	for i := range cmds {
		c := &cmds[i]
		if c.Path[0] == group && c.Path[1] == sub {
			return c, argv[2:], nil
		}
	}
	return nil, nil, usage("unrecognized subcommand '%s'", argv[1])
}

func canonical(word string) string {
	if a, ok := aliases[word]; ok {
		return a
	}
	return word
}

// parseOptions walks the words after the subcommand.
func (in *Invocation) parseOptions(words []string) error {
	c := in.Command
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "--":
			if c.Trailing == NoTrailing {
				return in.positionals(words[i+1:])
			}
			in.Trailing = append(in.Trailing, words[i+1:]...)
			return nil
		case strings.HasPrefix(w, "--"):
			n, err := in.long(w, words[i+1:])
			if err != nil {
				return err
			}
			i += n
		case strings.HasPrefix(w, "-") && len(w) > 1:
			n, err := in.shorts(w, words[i+1:])
			if err != nil {
				return err
			}
			i += n
		case c.Trailing == TrailingRequired:
			in.Trailing = append(in.Trailing, words[i:]...)
			return nil
		case c.Trailing == TrailingLast:
			return usage("unexpected argument '%s' found\n\n  tip: to pass '%s' as a value, use '-- %s'", w, w, w)
		default:
			if len(in.Args) >= c.Positionals {
				return usage("unexpected argument '%s' found", w)
			}
			in.Args = append(in.Args, w)
		}
	}
	return nil
}

func (in *Invocation) positionals(words []string) error {
	for _, w := range words {
		if len(in.Args) >= in.Command.Positionals {
			return usage("unexpected argument '%s' found", w)
		}
		in.Args = append(in.Args, w)
	}
	return nil
}

// long parses --name, --name=value or --name value; it returns how many of
// the following words it consumed.
func (in *Invocation) long(w string, next []string) (int, error) {
	name, value, hasValue := strings.Cut(w[2:], "=")
	fl := in.Command.flag(name)
	if fl == nil {
		return 0, usage("unexpected argument '--%s' found", name)
	}
	if fl.Kind == Bool {
		if hasValue {
			return 0, usage("unexpected value '%s' for '--%s' found; no more were expected", value, name)
		}
		return 0, in.setBool(fl)
	}
	if hasValue {
		return 0, in.setValue(fl, value)
	}
	if len(next) == 0 || (strings.HasPrefix(next[0], "-") && next[0] != "-") {
		return 0, usage("a value is required for '--%s <%s>' but none was supplied", name, strings.ToUpper(name))
	}
	return 1, in.setValue(fl, next[0])
}

// shorts parses -x, -xVALUE, -x VALUE and clusters of booleans like -it.
func (in *Invocation) shorts(w string, next []string) (int, error) {
	for j := 1; j < len(w); j++ {
		fl := in.Command.short(w[j])
		if fl == nil {
			return 0, usage("unexpected argument '-%c' found", w[j])
		}
		if fl.Kind == Bool {
			if err := in.setBool(fl); err != nil {
				return 0, err
			}
			continue
		}
		if rest := strings.TrimPrefix(w[j+1:], "="); rest != "" {
			return 0, in.setValue(fl, rest)
		}
		if len(next) == 0 || (strings.HasPrefix(next[0], "-") && next[0] != "-") {
			return 0, usage("a value is required for '-%c <%s>' but none was supplied", w[j], strings.ToUpper(fl.Long))
		}
		return 1, in.setValue(fl, next[0])
	}
	return 0, nil
}

func (in *Invocation) setBool(fl *Flag) error {
	if in.Bools[fl.Long] {
		return usage("the argument '--%s' cannot be used multiple times", fl.Long)
	}
	in.Bools[fl.Long] = true
	return nil
}

func (in *Invocation) setValue(fl *Flag, v string) error {
	if !fl.Repeat && len(in.Values[fl.Long]) > 0 {
		return usage("the argument '--%s <%s>' cannot be used multiple times", fl.Long, strings.ToUpper(fl.Long))
	}
	if err := checkValue(fl.Kind, v); err != nil {
		return usage("invalid value '%s' for '--%s <%s>': %s", v, fl.Long, strings.ToUpper(fl.Long), err.Error())
	}
	in.Values[fl.Long] = append(in.Values[fl.Long], v)
	return nil
}

// check applies the rules that need the whole command line.
func (in *Invocation) check() error {
	c := in.Command
	for _, fl := range c.Flags {
		if fl.Required && !in.Has(fl.Long) {
			return usage("the following required arguments were not provided:\n  --%s <%s>", fl.Long, strings.ToUpper(fl.Long))
		}
	}
	for _, pair := range c.Conflicts {
		if in.Has(pair[0]) && in.Has(pair[1]) {
			return usage("the argument '--%s' cannot be used with '--%s'", pair[0], pair[1])
		}
	}
	if len(in.Args) < c.Positionals {
		return usage("the following required arguments were not provided: %d positional argument(s)", c.Positionals-len(in.Args))
	}
	if c.Trailing == TrailingRequired && len(in.Trailing) == 0 {
		return usage("the following required arguments were not provided:\n  <COMMAND>...")
	}
	return nil
}

// checkValue is the value parser of each kind.
func checkValue(kind Kind, v string) error {
	switch kind {
	case Uint:
		if _, err := strconv.ParseUint(v, 10, 32); err != nil {
			return errText("invalid digit found in string")
		}
	case PortMap:
		return checkPortMap(v)
	case KeyValue:
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return errText("expected KEY=VALUE")
		}
	case Duration:
		return checkDuration(v)
	case Backend:
		if v != "tsi" && v != "virtio-net" {
			return errText("possible values: tsi, virtio-net")
		}
	}
	return nil
}

// checkPortMap accepts HOST:GUEST or PORT, each 1..65535: there is no bind
// address syntax in 1.0.4.
func checkPortMap(v string) error {
	parts := strings.Split(v, ":")
	if len(parts) > 2 {
		return errText("invalid port mapping (expected HOST:GUEST or PORT)")
	}
	for _, p := range parts {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return errText("invalid port mapping (expected HOST:GUEST or PORT)")
		}
	}
	return nil
}

// ParsePortMap returns the host and guest port of a valid mapping.
func ParsePortMap(v string) (host, guest int) {
	h, g, ok := strings.Cut(v, ":")
	if !ok {
		g = h
	}
	host, _ = strconv.Atoi(h)
	guest, _ = strconv.Atoi(g)
	return host, guest
}

// ParseDuration parses smolvm's duration syntax ("30s", "5m", "1h", "250ms").
func ParseDuration(v string) (time.Duration, error) {
	if err := checkDuration(v); err != nil {
		return 0, err
	}
	return time.ParseDuration(v)
}

func checkDuration(v string) error {
	for _, unit := range []string{"ms", "s", "m", "h"} {
		if num, ok := strings.CutSuffix(v, unit); ok && num != "" {
			if _, err := strconv.ParseUint(num, 10, 64); err == nil {
				return nil
			}
		}
	}
	return errText("invalid duration (e.g. 30s, 5m)")
}

type errText string

func (e errText) Error() string { return string(e) }
