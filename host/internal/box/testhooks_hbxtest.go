//go:build hbxtest

package box

func init() {
	hooks.sshUser = "HBX_TEST_SSH_USER"
	hooks.relayCommand = "HBX_TEST_RELAY_COMMAND"
	hooks.host = "HBX_TEST_HOST"
	hooks.timing = "HBX_TEST_TIMING"
	hooks.agentPins = "HBX_TEST_AGENT_PINS"
	hooks.guestPins = "HERMES_BOX_AGENT_TEST_ONLY_PINS"
	hooks.netprobePlan = "HBX_TEST_NETPROBE_PLAN"
	hooks.netcheckHost = "HBX_TEST_NETCHECK_HOST"
	hooks.lanGateway = "HBX_TEST_LAN_GATEWAY"
	hooks.hostOS = "HBX_TEST_HOST_OS"
}
