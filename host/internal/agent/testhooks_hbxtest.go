//go:build hbxtest

package agent

func init() {
	deadlineHook = "HBX_TEST_AGENT_DEADLINE"
}
