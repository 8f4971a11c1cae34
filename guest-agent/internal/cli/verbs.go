package cli

// verbRow is one row of the agent's verb table.
type verbRow struct {
	verb verb
	// relay: the host may call the verb through the relay (the allow-list).
	relay bool
}

// verbTable is every verb of the agent, in one place, with the relay
// column: the verbs the host's relay may dispatch in-process are exactly
// those marked here. Each verb's row names its summary and its run
// function, which lives in the verb's own file; the executor verb hands the
// image subcommands to the Executor helper binary. It is filled in init only
// because the relay verb dispatches through it (a package-level initializer
// may not refer to itself).
var verbTable []verbRow

func init() {
	verbTable = []verbRow{
		{verb{
			name:    "audit",
			summary: "verify, show or print the approval gate's hash-chained audit log (verify|show [--json], raw)",
			relay:   true,
			run:     runAudit,
		}, true},
		{verb{
			name:    "boot",
			summary: "prepare the box and supervise its services until SIGTERM (the entrypoint)",
			run:     runBoot,
		}, false},
		{verb{
			name:    "executor",
			summary: executorDelegateSummary,
			run:     runExecutorDelegate,
		}, true},
		{verb{
			name:    "health",
			summary: "report the box's health (--json for the versioned report)",
			run:     runHealth,
		}, true},
		{verb{
			name:    "hostkeys",
			summary: "create missing SSH host keys and print their fingerprints as JSON",
			run:     runHostkeys,
		}, false},
		{verb{
			name:    "logs",
			summary: "NAME [-n N] [-f]: print (and follow) a service's log",
			run:     runLogs,
		}, true},
		{verb{
			name:    "netcheck",
			summary: "check the default IPv4 route and IPv4 DNS for the package host (JSON; exit 1 when not ready)",
			run:     runNetcheck,
		}, false},
		{verb{
			name:    "netprobe",
			summary: "prove the network mode: read a plan (JSON) on stdin, print the probes (JSON); exit 1 when one contradicts the mode",
			run:     runNetprobe,
		}, true},
		{verb{
			name:    "patch",
			summary: "put the approval gate into the Hermes tree (hermes [--root DIR] [--commit SHA]), or --check DIR: the version, its gate mechanism, and everything that mechanism relies on",
			run:     runPatch,
		}, false},
		{verb{
			name:    "provision",
			summary: "turn this Ubuntu builder into a Hermes Box image (--dry-run lists the changes)",
			run:     runProvision,
		}, false},
		{verb{
			name:    "relay",
			summary: "read one protocol request on stdin and run its verb (the host's entry point)",
			run:     runRelay,
		}, false},
		{verb{
			name:    "secrets",
			summary: "set: read the mapped secrets on stdin, keep them on tmpfs, restart the Hermes gateway with them",
			run:     runSecrets,
		}, true},
		{verb{
			name:    "seed-config",
			summary: "set the approval gate's settings (for the pinned Hermes's mechanism), security and terminal backend in Hermes' config.yaml, keeping the rest",
			run:     runSeedConfig,
		}, false},
		{verb{
			name:    "services",
			summary: "status [--json] | start|stop|restart NAME|all: the supervised services",
			run:     runServices,
		}, true},
		{verb{
			name:    "snapshot",
			summary: "write rootfs|workspace: a gzip tar on stdout; chunks rootfs|workspace: the chunks the host lacks (held ids on stdin); apply: restore the parts framed on stdin",
			run:     runSnapshot,
		}, true},
		{verb{
			name:    SupervisorctlName,
			summary: supervisorctlUsage,
			run:     runSupervisorctl,
		}, false},
		{verb{
			name:    "version",
			summary: "print the agent's version",
			run:     runVersion,
		}, true},
	}
}

// Verbs returns the table's verbs, relay column applied, in table order.
func Verbs() []verb {
	out := make([]verb, len(verbTable))
	for i, r := range verbTable {
		out[i] = r.verb
		out[i].relay = r.relay
	}
	return out
}

// lookup finds a verb by name.
func lookup(name string) (verb, bool) {
	for _, v := range Verbs() {
		if v.name == name {
			return v, true
		}
	}
	return verb{}, false
}
