//go:build race

package chunkstore

// raceEnabled: this test binary carries the race detector; the tests of
// millions of chunks run in one built without it (runPlain).
const raceEnabled = true
