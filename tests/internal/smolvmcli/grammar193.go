package smolvmcli

import (
	"fmt"
	"slices"
)

// The releases whose grammar this package knows.
const (
	V104 = "1.0.4"
	V193 = "1.9.3"
	// V125 is the newest release seen (1.25.4); its grammar is known only
	// from second-hand reports and single indexed files
	// (reference/upstream-today.md): 1.9.3's flags unchanged, plus
	// `machine pause` and `machine resume`.
	V125 = "1.25.4"
)

// Versions lists the known releases, oldest first.
var Versions = []string{V104, V193, V125}

// VersionLine is what `smolvm --version` prints for release.
func VersionLine(release string) string { return "smolvm " + release }

// Commands193 is the grammar of smolvm 1.9.3 (src/cli/machine.rs and
// src/cli/pack.rs at tag v1.9.3): 1.0.4's, with additive flags and the
// subcommands egress-events and fork-release.
var Commands193 = grammar193()

func grammar193() []Command {
	cs := make([]Command, 0, len(Commands)+2)
	for _, c := range Commands {
		c.Flags = slices.Clone(c.Flags)
		c.Conflicts = slices.Clone(c.Conflicts)
		switch c.Name() {
		case "machine create":
			c.Flags = append(c.Flags, rep("label", 0, KeyValue), f("max-image-size", 0, Text), f("dns", 0, Text),
				f("network", 0, Text), f("rosetta", 0, Bool), rep("expose-socket", 0, Text), rep("mount-socket", 0, Text),
				f("cuda", 0, Bool), f("auto-graph", 0, Bool), f("docker-socket", 0, Bool))
		case "machine start":
			c.Flags = append(c.Flags, f("fork-pool-size", 0, Uint), f("cuda-vram-limit-mib", 0, Uint))
		case "machine exec":
			c.Flags = append(c.Flags, f("detach", 'd', Bool))
			c.Conflicts = append(c.Conflicts, [2]string{"detach", "interactive"}, [2]string{"detach", "tty"}, [2]string{"detach", "stream"})
		case "machine delete":
			c.Flags = append(c.Flags, f("cascade", 0, Bool))
		case "machine update":
			c.Flags = append(c.Flags, f("rosetta", 0, Bool), f("no-rosetta", 0, Bool))
			c.Conflicts = append(c.Conflicts, [2]string{"rosetta", "no-rosetta"})
		case "machine cp":
			c.Flags = append(c.Flags, f("mode", 0, Text), f("uid", 0, Uint), f("gid", 0, Uint))
		case "pack create":
			c.Flags = append(c.Flags, f("rebase-from-image", 0, Bool), f("staging-dir", 0, Text))
		}
		cs = append(cs, c)
	}
	return append(cs,
		Command{Path: []string{"machine", "egress-events"}, Flags: []Flag{f("name", 'n', Text), f("limit", 0, Uint), f("json", 0, Bool)}},
		Command{Path: []string{"machine", "fork-release"}, Flags: []Flag{f("name", 'n', Text)}},
	)
}

// Commands125 is the grammar of the 1.25 profile: 1.9.3's, with the
// subcommands pause and resume.
var Commands125 = append(slices.Clone(Commands193),
	Command{Path: []string{"machine", "pause"}, Flags: []Flag{f("name", 'n', Text)}},
	Command{Path: []string{"machine", "resume"}, Flags: []Flag{f("name", 'n', Text)}},
)

// Grammar returns the subcommands of release.
func Grammar(release string) ([]Command, error) {
	switch release {
	case V104:
		return Commands, nil
	case V193:
		return Commands193, nil
	case V125:
		return Commands125, nil
	}
	return nil, fmt.Errorf("no smolvm grammar for release %q (known: %v)", release, Versions)
}
