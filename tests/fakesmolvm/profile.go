package main

import (
	"os"
	"slices"
	"strings"
)

// The broken profiles: $FAKESMOLVM_BROKEN holds, comma-separated, the ways
// the fake departs from the release it stands in for, so that hermes-box's
// checks of the binary in front of it can be seen to refuse it.
const (
	// brokenUnconfinedVMM: the VMM ignores SMOLVM_SECCOMP=enforce and runs
	// without a seccomp filter.
	brokenUnconfinedVMM = "vmm-unconfined"
	// brokenHelpLacksFlag: `machine create --help` does not list
	// --net-backend, which hermes-box passes when it creates the builder.
	brokenHelpLacksFlag = "help-lacks-flag"
	// brokenFloorLeaks: the VMM ignores SMOLVM_EGRESS_FLOOR=strict and
	// floors nothing: the host alias, the LAN and cloud metadata all answer
	// (floor.go).
	brokenFloorLeaks = "floor-leaks"
	// brokenPackDropsXattrs: `pack create --from-vm` leaves the files'
	// extended attributes behind, as reported for 1.22.2.
	brokenPackDropsXattrs = "pack-drops-xattrs"
)

// helpOmits lists the long flags a subcommand's help leaves out.
func helpOmits(command string) []string {
	if broken(brokenHelpLacksFlag) && command == "machine create" {
		return []string{"net-backend"}
	}
	return nil
}

// broken reports whether the profile departs from smolvm in that way.
func broken(what string) bool {
	return slices.Contains(strings.Split(os.Getenv("FAKESMOLVM_BROKEN"), ","), what)
}
