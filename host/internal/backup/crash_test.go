package backup

const (
	envCrashOp  = "HB_TEST_CRASH_OP"
	envCrashAt  = "HB_TEST_CRASH_AT"
	envAgentBin = "HB_TEST_AGENT_BIN"
)

func crashHelper(op string) int { return 3 }
