package smolvmcli

import (
	"fmt"
	"strings"
)

// Help is the long help of a subcommand (`smolvm machine create --help`)
// in the layout of clap 4, which smolvm's CLI is built with: a usage line,
// then one entry per option, the short form first, the value name in
// angle brackets, the description on the next line. omit names long
// flags left out of the listing (a broken profile's help).
func Help(c *Command, omit ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nUsage: smolvm %s [OPTIONS]%s\n", about(c), c.Name(), usageTail(c))
	if c.Positionals > 0 || c.Trailing != NoTrailing {
		b.WriteString("\nArguments:\n")
		for i := range c.Positionals {
			fmt.Fprintf(&b, "  <ARG%d>\n          Positional argument %d\n\n", i+1, i+1)
		}
		if c.Trailing != NoTrailing {
			b.WriteString("  [COMMAND]...\n          Command to run\n\n")
		}
	}
	b.WriteString("\nOptions:\n")
	for _, fl := range c.Flags {
		if contains(omit, fl.Long) {
			continue
		}
		b.WriteString("  " + flagSpec(fl) + "\n          " + describe(fl) + "\n\n")
	}
	b.WriteString("  -h, --help\n          Print help (see a summary with '-h')\n")
	return b.String()
}

func flagSpec(fl Flag) string {
	spec := "    "
	if fl.Short != 0 {
		spec = "-" + string(fl.Short) + ", "
	}
	spec += "--" + fl.Long
	if fl.Kind != Bool {
		spec += " <" + strings.ToUpper(strings.ReplaceAll(fl.Long, "-", "_")) + ">"
	}
	return spec
}

func describe(fl Flag) string {
	d := "The " + strings.ReplaceAll(fl.Long, "-", " ") + " setting"
	if fl.Repeat {
		d += " (can be given more than once)"
	}
	if fl.Required {
		d += " [required]"
	}
	return d
}

func about(c *Command) string { return "Run `smolvm " + c.Name() + "`" }

func usageTail(c *Command) string {
	switch c.Trailing {
	case TrailingLast:
		return " [-- <COMMAND>...]"
	case TrailingRequired:
		return " <COMMAND>..."
	}
	return strings.Repeat(" <ARG>", c.Positionals)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
