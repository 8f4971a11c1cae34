package box

import "os"

// The test hooks: environment variables that change only how hermes-box
// reaches a box it owns, never what it asks smolvm to do, so that tests can
// stand a real sshd and a fake smolvm in for the box. A release binary has
// no hook names — they are empty, and nothing in its environment can switch
// a hook on; binaries built with the hbxtest tag name them
// (testhooks_hbxtest.go).
var hooks struct {
	sshUser      string // the SSH login user instead of boxadmin
	relayCommand string // the remote command instead of boxlayout.RelayCommand
	host         string // "supported" skips the host OS/arch check
	timing       string // "fast" shortens every wait; "fast-watch" also beats and checks the machine every second or less
	agentPins    string // a directory of stand-in artifacts for provision (testpins.go)
	guestPins    string // the agent's own variable for them
	netprobePlan string // a JSON netproof.Plan whose targets replace the production ones (tests must not probe outside addresses)
	netcheckHost string // the name the builder's netcheck resolves instead of the Ubuntu archive for its architecture (a test network that answers only some names)
	lanGateway   string // the address doctor's egress row probes as the host's LAN gateway (tests must not probe the real one)
	hostOS       string // the host OS (a GOOS value) the platform-specific preflight checks judge, e.g. darwin's socket path on Linux
}

// hookValue is the value of the hook variable name; "" when the binary
// has no such hook.
func hookValue(name string) string {
	if name == "" {
		return ""
	}
	return os.Getenv(name)
}
