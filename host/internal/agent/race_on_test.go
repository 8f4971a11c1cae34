//go:build race

package agent_test

// raceEnabled: this test binary carries the race detector, whose own
// memory the matrix must not count as the host's.
const raceEnabled = true
