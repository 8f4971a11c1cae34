package protocol

// DiscoveryRefresh is the result of the agent's `executor
// refresh-discovery` verb: whether this call restarted the Hermes gateway
// (false when it had been restarted already in this boot, after Executor
// turned healthy), and the boot it was for.
type DiscoveryRefresh struct {
	Restarted bool   `json:"restarted"`
	BootID    string `json:"bootId"`
}
