package agent

import (
	"os"
	"time"
)

// deadlineHook names the test hook that shortens every verb's deadline to
// its value (a Go duration), so that tests of a box that never answers end
// in seconds. A release binary has no hook name: it is empty there, and
// only binaries built with the hbxtest tag name it (testhooks_hbxtest.go).
var deadlineHook string

// hookDeadline is the deadline the test hook sets, 0 when none.
func hookDeadline() time.Duration {
	if deadlineHook == "" {
		return 0
	}
	d, err := time.ParseDuration(os.Getenv(deadlineHook))
	if err != nil {
		return 0
	}
	return d
}
