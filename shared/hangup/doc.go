// Package hangup notices that the reader of a process's output went away:
// a verb relayed over SSH learns that the host's session ended (Ctrl-C on
// `hermes-box logs -f`, a lost connection) while it only waits, instead of
// at its next write. Linux only: the host does not use it.
package hangup
