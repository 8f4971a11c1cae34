package cli

// verbRow is one row of the agent's verb table.
type verbRow struct {
	verb verb
	// relay: the host may call the verb through the relay (the allow-list).
	relay bool
}

// verbTable is every verb of the agent, in one place, with the relay
// column: the verbs the host's relay may dispatch in-process are exactly
// those marked here. executorVerb is the Executor's image pull itself in
// the helper binary (oci tag) and a hand-off to that helper in the lean
// agent. It is filled in init only because the relay verb dispatches
// through it (a package-level initializer may not refer to itself).
var verbTable []verbRow

func init() {
	verbTable = []verbRow{
		{auditVerb, true},
		{bootVerb, false},
		{executorVerb, true},
		{healthVerb, true},
		{hostkeysVerb, false},
		{logsVerb, true},
		{netcheckVerb, false},
		{netprobeVerb, true},
		{patchVerb, false},
		{provisionVerb, false},
		{relayVerb, false},
		{secretsVerb, true},
		{seedConfigVerb, false},
		{servicesVerb, true},
		{snapshotVerb, true},
		{supervisorctlVerb, false},
		{versionVerb, true},
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
