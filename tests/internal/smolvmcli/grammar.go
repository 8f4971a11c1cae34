// Package smolvmcli is the command-line grammar of smolvm 1.0.4, as its clap
// definitions declare it (src/cli/machine.rs, src/cli/pack.rs at tag v1.0.4),
// for the subcommands hermes-box drives and their neighbours. A stand-in for
// smolvm (the fake smolvm, the QEMU-backed one) parses its argv with Parse and
// so refuses exactly what 1.0.4 refuses: an unknown flag, `-n` on exec, a
// missing value, a bad port or number, conflicting flags.
//
// Parse errors are clap's: "error: …" on stderr and exit status 2
// (UsageError). smolvm's own failures, which a stand-in reports after parsing,
// are "Error: …" and exit status 1 (see Fail).
package smolvmcli

import (
	"fmt"
	"io"
	"strings"
)

// Version is what `smolvm --version` prints.
const Version = "smolvm 1.0.4"

// Exit statuses of smolvm 1.0.4.
const (
	ExitError   = 1   // smolvm's own error: "Error: …"
	ExitUsage   = 2   // clap's usage error: "error: …"
	ExitTimeout = 124 // exec/run --timeout expired
)

// Kind says what a flag's value must look like.
type Kind int

// The value kinds checked at parse time, as clap's value parsers do.
const (
	Bool     Kind = iota // no value
	Text                 // any string
	Uint                 // an unsigned integer
	PortMap              // HOST:GUEST or PORT, neither 0
	KeyValue             // KEY=VALUE (KEY non-empty)
	Duration             // "30s", "5m", "1h", "250ms"
	Backend              // tsi | virtio-net
)

// Flag is one option of a subcommand.
type Flag struct {
	Long     string
	Short    byte // 0 when the flag has no short form
	Kind     Kind
	Repeat   bool
	Required bool
}

// Trailing says whether a subcommand takes a command after its options.
type Trailing int

// How a subcommand takes a trailing command.
const (
	NoTrailing       Trailing = iota
	TrailingLast              // only after `--` (clap last = true)
	TrailingRequired          // first positional starts it; `--` optional (trailing_var_arg, required)
)

// Command is one subcommand's grammar.
type Command struct {
	Path        []string // e.g. {"machine", "create"}
	Flags       []Flag
	Positionals int // exact number of positional arguments (cp: 2)
	Trailing    Trailing
	Conflicts   [][2]string // pairs of long flags that may not be given together
}

// Name is the subcommand's path joined by spaces, e.g. "machine create".
func (c *Command) Name() string { return strings.Join(c.Path, " ") }

func (c *Command) flag(long string) *Flag {
	for i := range c.Flags {
		if c.Flags[i].Long == long {
			return &c.Flags[i]
		}
	}
	return nil
}

func (c *Command) short(s byte) *Flag {
	for i := range c.Flags {
		if c.Flags[i].Short == s {
			return &c.Flags[i]
		}
	}
	return nil
}

func f(long string, short byte, kind Kind) Flag { return Flag{Long: long, Short: short, Kind: kind} }
func rep(long string, short byte, kind Kind) Flag {
	return Flag{Long: long, Short: short, Kind: kind, Repeat: true}
}
func req(long string, short byte, kind Kind) Flag {
	return Flag{Long: long, Short: short, Kind: kind, Required: true}
}

// Commands is the grammar, one entry per subcommand. Aliases are resolved by
// Parse (machine|vm, delete|rm, ls|list, shell|sh).
var Commands = []Command{
	{Path: []string{"machine", "create"}, Trailing: TrailingLast, Flags: []Flag{
		f("name", 'n', Text), f("image", 'I', Text), f("cpus", 0, Uint), f("mem", 0, Uint),
		f("storage", 0, Uint), f("overlay", 0, Uint), rep("volume", 'v', Text), rep("port", 'p', PortMap),
		f("net", 0, Bool), f("net-backend", 0, Backend), rep("allow-cidr", 0, Text), rep("allow-host", 0, Text),
		f("outbound-localhost-only", 0, Bool), f("gpu", 0, Bool), f("gpu-vram", 0, Uint), rep("init", 0, Text),
		rep("env", 'e', KeyValue), f("workdir", 'w', Text), f("ssh-agent", 0, Bool),
		rep("secret-env", 0, KeyValue), rep("secret-file", 0, KeyValue), f("smolfile", 's', Text), f("from", 0, Text),
	}, Conflicts: [][2]string{{"from", "image"}, {"from", "smolfile"}}},
	{Path: []string{"machine", "start"}, Flags: []Flag{
		f("name", 'n', Text), f("forkable", 0, Bool), f("proxy", 0, Text), f("no-proxy", 0, Text),
	}},
	{Path: []string{"machine", "stop"}, Flags: []Flag{f("name", 'n', Text)}},
	{Path: []string{"machine", "delete"}, Flags: []Flag{req("name", 'n', Text), f("force", 'f', Bool)}},
	{Path: []string{"machine", "status"}, Flags: []Flag{f("name", 'n', Text), f("json", 0, Bool)}},
	{Path: []string{"machine", "ls"}, Flags: []Flag{f("verbose", 'v', Bool), f("json", 0, Bool)}},
	{Path: []string{"machine", "exec"}, Trailing: TrailingRequired, Flags: []Flag{
		f("name", 0, Text), f("workdir", 'w', Text), rep("env", 'e', KeyValue), rep("secret-env", 0, KeyValue),
		rep("secret-file", 0, KeyValue), f("timeout", 0, Duration), f("interactive", 'i', Bool),
		f("tty", 't', Bool), f("stream", 0, Bool),
	}},
	{Path: []string{"machine", "update"}, Flags: []Flag{
		req("name", 'n', Text), rep("volume", 'v', Text), rep("remove-volume", 0, Text), rep("port", 'p', PortMap),
		rep("remove-port", 0, Text), f("cpus", 0, Uint), f("mem", 0, Uint), f("net", 0, Bool), f("no-net", 0, Bool),
		rep("env", 'e', KeyValue), rep("remove-env", 0, Text), f("workdir", 'w', Text), f("gpu", 0, Bool),
		f("no-gpu", 0, Bool), f("storage", 0, Uint), f("overlay", 0, Uint),
	}, Conflicts: [][2]string{{"net", "no-net"}, {"gpu", "no-gpu"}}},
	{Path: []string{"machine", "cp"}, Positionals: 2},
	{Path: []string{"machine", "data-dir"}, Flags: []Flag{req("name", 'n', Text)}},
	{Path: []string{"machine", "shell"}, Flags: []Flag{f("name", 'n', Text)}},
	{Path: []string{"pack", "create"}, Flags: []Flag{
		f("image", 'I', Text), f("from-vm", 0, Text), req("output", 'o', Text), f("cpus", 0, Uint), f("mem", 0, Uint),
		f("oci-platform", 0, Text), f("entrypoint", 0, Text), f("no-sign", 0, Bool), f("single-file", 0, Bool),
		f("smolfile", 's', Text), f("gpu", 0, Bool), f("proxy", 0, Text), f("no-proxy", 0, Text),
	}, Conflicts: [][2]string{{"image", "from-vm"}}},
}

var aliases = map[string]string{"vm": "machine", "rm": "delete", "list": "ls", "sh": "shell"}

// Invocation is a parsed command line.
type Invocation struct {
	// Version is set for `smolvm --version`; Command is nil then.
	Version bool
	// Help is set for `smolvm GROUP SUB --help`: print Help(Command).
	Help     bool
	Command  *Command
	Values   map[string][]string // value flags by long name, in order given
	Bools    map[string]bool     // boolean flags given
	Args     []string            // positional arguments
	Trailing []string            // the command after the options (exec, create)
}

// Value returns the last value of a value flag, or "".
func (in *Invocation) Value(long string) string {
	v := in.Values[long]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// Has reports whether a flag was given.
func (in *Invocation) Has(long string) bool {
	return in.Bools[long] || len(in.Values[long]) > 0
}

// UsageError is a command line 1.0.4 refuses while parsing.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return "error: " + e.Msg }

func usage(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// Fail writes smolvm's own error shape to w and returns its exit status.
func Fail(w io.Writer, format string, args ...any) int {
	fmt.Fprintf(w, "Error: %s\n", fmt.Sprintf(format, args...))
	return ExitError
}

// ReportUsage writes a usage error as clap does and returns its exit status.
func ReportUsage(w io.Writer, err error) int {
	fmt.Fprintf(w, "%s\n\nFor more information, try '--help'.\n", err)
	return ExitUsage
}
