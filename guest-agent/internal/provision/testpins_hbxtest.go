//go:build hbxtest

package provision

// TestPinsEnv names the environment variable through which tests point the
// agent at a JSON file of stand-in artifacts on a loopback HTTPS server. It
// exists only in binaries built with the hbxtest tag: a release agent has
// no such hook, whatever its environment says.
const TestPinsEnv = "HERMES_BOX_AGENT_TEST_ONLY_PINS"
