// The fakesmolvm command stands in for smolvm 1.0.4, 1.9.3 or the 1.25
// profile in tests ($FAKESMOLVM_VERSION, default 1.0.4; 1.25.x adds the
// status keys and the paused/pausing states of the 1.25 line and `machine
// pause`/`resume`; any other release prints its own version and behaves as
// 1.9.3). Installed on PATH as `smolvm`, it parses its command line with
// that release's grammar (tests/internal/smolvmcli), answers `SUB --help`
// with that grammar's help in clap's layout, and refuses anything else as
// clap would, keeps
// machines as directories under $FAKESMOLVM_STATE, prints the `ls --json` and
// `status --json` shapes, and records every argv as one JSON line in
// $FAKESMOLVM_LOG.
//
// A machine is <state>/machines/<name>/ with machine.json (the record),
// root/ (its file system: `cp` copies into it, `exec` runs commands from it;
// an exec of .../hermes-box-agent gets `--root <root>` inserted so the agent
// works on the machine's tree) and data/ (what `data-dir` prints). `create
// --image I` seeds root/ from $FAKESMOLVM_IMAGES/<I with ':' as '_'> when
// that exists; `pack create --from-vm` archives a stopped machine's root and
// `create --from` extracts it and writes data/pack/.smolvm-extracted, which
// the extraction-cache eviction of 1.0.4 deletes when $FAKESMOLVM_PACK_SIZE
// (the simulated extracted size) exceeds SMOLVM_PACK_CACHE_MAX_BYTES
// (default 5 GiB).
//
// `start` of a machine with published ports runs a detached forwarder
// (`_forward`, like smolvm's `_boot-vm`) that listens on 127.0.0.1 and, best
// effort, ::1 (or on $SMOLVM_PUBLISH_ADDR, as 1.0.4 does) and forwards each
// connection to $FAKESMOLVM_GUEST_<guest port> (host:port), or, for a machine
// with an entrypoint, to a loopback address the fake gives that guest port
// while the machine runs, or closes it; `stop` and `delete` end it.
//
// Release differences it models: on 1.9.3 under Linux, `create --from`
// extracts into the shared store <state>/vms/_shared/<crc32>/ (marker and
// layers/ there), leaves data/pack/ empty and writes data/.pack-shared with
// that directory's path, unless SMOLVM_DISABLE_SHARED_EXTRACT is set; on
// both, `create --from` drops --secret-env (the machine never sees those
// variables) and 1.0.4 drops --allow-host/--allow-cidr/
// --outbound-localhost-only there too, while 1.9.3 keeps them in the record
// (`egress`). `start` records the SMOLVM_EGRESS_FLOOR it ran with in the
// record (`egress_floor`), and every call's SMOLVM_* variables are in the log.
//
// `pack create --smolfile` keeps the Smolfile's entrypoint and cmd in the
// artifact, and `start` of a machine created --from it runs them detached,
// as the guest's init would (its output is the console,
// data/agent-console.log): the agent (with --root <root>, and `--table`
// with $FAKESMOLVM_BOOT_TABLE rendered for the machine), the machine's -e and
// --secret-env variables in its environment. `stop` sends it SIGTERM, waits
// (bounded), then kills its session; `delete --force` does the same, and the
// machine is `running` only while the entrypoint lives (entrypoint.go).
//
// A guest command `exec` runs (not the stand-in agent) gets a network
// namespace of its own in which only what the release's egress floor lets
// through answers, on addresses no real network uses (floor.go).
//
// Every running machine has a VMM process (`_forward`, whose pid status
// reports): it makes itself non-dumpable (PR_SET_DUMPABLE 0) on Linux
// unless SMOLVM_FORKABLE is set, as smolvm's does; under SMOLVM_SECCOMP=enforce it puts itself under a real
// seccomp filter before it reports ready, as smolvm's `_boot-vm` does.
// Broken profiles ($FAKESMOLVM_BROKEN, profile.go) depart from smolvm on
// purpose: a VMM that ignores SMOLVM_SECCOMP, a help that lacks a flag, a
// floor that ignores SMOLVM_EGRESS_FLOOR=strict, a pack that drops
// extended attributes.
//
// With $FAKESMOLVM_OWNER_PID set, `start` also runs a detached watcher
// (`_watch`) that stops the machine's processes when that process (the
// test binary) dies without stopping them.
//
// Failures on demand: $FAKESMOLVM_FAIL or the file <state>/fail hold rules,
// one per line or comma-separated, "SUBCOMMAND[@NAME][#N][=CODE]", for example
// "machine start@hermes-builder#2" (the second start of that machine fails)
// or "pack create=1". A failing call prints "Error: injected failure" (or
// "Error: $FAKESMOLVM_FAIL_MESSAGE") and exits with CODE (default 1)
// without changing anything. Hangs on demand:
// the rules of the file <state>/hang make a call sleep for an hour before
// it does anything, after appending its command to <state>/hang.reached.
package main

import (
	"fmt"
	"os"

	"github.com/hermes-box/hermes-box/tests/internal/smolvmcli"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 && args[0] == "_forward" {
		return forwardMain(args[1:])
	}
	if len(args) > 0 && args[0] == "_netns" {
		return netnsMain(args[1:])
	}
	if len(args) > 0 && args[0] == "_watch" {
		return watchMain(args[1:])
	}
	f, err := newFake()
	if err != nil {
		return smolvmcli.Fail(os.Stderr, "%v", err)
	}
	if err := f.record(args); err != nil {
		return smolvmcli.Fail(os.Stderr, "recording argv: %v", err)
	}
	in, err := smolvmcli.ParseFor(grammar(), args)
	if err != nil {
		return smolvmcli.ReportUsage(os.Stderr, err)
	}
	if in.Version {
		fmt.Println(smolvmcli.VersionLine(release()))
		return 0
	}
	if in.Help {
		fmt.Print(smolvmcli.Help(in.Command, helpOmits(in.Command.Name())...))
		return 0
	}
	if code, failed := f.hang(in); failed {
		return code
	}
	if code, failed := f.injected(in); failed {
		return code
	}
	return f.dispatch(in)
}
