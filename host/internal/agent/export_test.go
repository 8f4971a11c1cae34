package agent

// SetDeadlineHook names the variable that shortens every deadline, in this
// package's test binary only (a release build has no hook name).
func SetDeadlineHook(name string) { deadlineHook = name }
