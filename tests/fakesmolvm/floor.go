package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

// The egress floor, as the release's row says smolvm applies it
// (crates/smolvm-network/src/egress.rs: a denied guest SYN is dropped). An
// exec'd guest process runs in a fresh network namespace of its own, never
// on this host's network, so a test can never reach the real LAN or cloud
// metadata: lo is down when nothing may be reached, and otherwise up with
// the destinations the floor lets through routed to it as local addresses,
// so that a connect to them is refused (the target answered). The fake's
// LAN is TEST-NET-1, 192.0.2.0/24 (tests name 192.0.2.1 as the host's
// gateway); the host alias is smolvm's virtio-net gateway 100.96.0.1.
//
// The stand-in agent (an exec of .../hermes-box-agent) keeps this host's
// network: tests serve what it talks to on the host's loopback.
const (
	fakeLAN       = "192.0.2.0/24"
	fakeHostAlias = "100.96.0.1/32"
	fakeMetadata  = "169.254.169.254/32"
	floorStrict   = "strict"
)

// floorReach lists the destinations a guest of a machine started with
// SMOLVM_EGRESS_FLOOR=floor reaches: none under the strict floor (and
// 1.0.4's default full floor); the LAN, and the host's loopback through
// the alias on 1.7.2–1.12.x, under the default (metadata-only) floor;
// everything when the floor is off.
func floorReach(floor string) []string {
	r, _, err := pins.Smolvm(release(), true)
	if err != nil {
		r = pins.SmolvmBeyond(release())
	}
	mode := strings.ToLower(strings.TrimSpace(floor))
	if !r.EgressFloorVar {
		mode = "" // 1.0.4 reads no variable
	}
	switch {
	case broken(brokenFloorLeaks), mode == "off", mode == "none":
		return []string{fakeLAN, fakeHostAlias, fakeMetadata}
	case mode == floorStrict, mode == "" && r.DefaultFloorStrict:
		return nil
	case r.HostLoopbackAlias:
		return []string{fakeLAN, fakeHostAlias}
	}
	return []string{fakeLAN}
}

// guestNetwork puts cmd, a guest command of machine r, into its network
// namespace; the stand-in agent keeps the host's.
func guestNetwork(cmd *exec.Cmd, r *record, argv []string) error {
	if isAgent(argv[0]) || cmd.Err != nil {
		return nil
	}
	return isolateNet(cmd, floorReach(r.EgressFloor))
}

func isAgent(path string) bool { return filepath.Base(path) == agentName }

// netnsMain is `fakesmolvm _netns REACH -- PATH ARGV...`, run in a fresh
// network namespace: it routes REACH (comma-separated prefixes) to lo as
// local addresses, then becomes the command.
func netnsMain(args []string) int {
	if len(args) < 4 || args[1] != "--" {
		return smolvmcli.Fail(os.Stderr, "usage: _netns REACH -- PATH ARGV...")
	}
	if err := routeLocal(strings.FieldsFunc(args[0], func(r rune) bool { return r == ',' })); err != nil {
		return smolvmcli.Fail(os.Stderr, "guest network: %v", err)
	}
	return execInPlace(args[2], args[3:])
}
