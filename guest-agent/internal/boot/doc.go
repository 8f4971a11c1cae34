// Package boot is what the box does on every start (the Smolfile
// entrypoint `hermes-box-agent boot`): idempotent preparation steps on an
// injectable root (restore-mode wait, host keys, smolvm's ownership
// repair, /tmp modes, workspace seed and ownership), each logged as one
// line in the startup log, then the supervisor in the foreground with the
// box's program table and the control socket, until SIGTERM stops every
// program in order.
package boot
