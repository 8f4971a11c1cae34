//go:build hbxtest

package cli

// A test build names the hook: tests point the agent at a JSON file of
// stand-in artifacts on a loopback HTTPS server.
func init() { testPinsEnv = "HERMES_BOX_AGENT_TEST_ONLY_PINS" }
