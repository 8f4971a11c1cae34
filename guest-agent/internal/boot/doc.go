// Package boot is what the box does on every start (the Smolfile
// entrypoint `hermes-box-agent boot`): idempotent preparation steps on an
// injectable root, each logged as one line in the startup log, then the
// supervisor in the foreground with the box's program table and the
// control socket, until SIGTERM stops every program in order.
//
// The steps (Steps, in order) are at least as wide as the reference's
// start script: the restore-mode wait; the repairs of what smolvm's pack
// does to a root (stray hex-named files, every owner remapped to the
// host's uid:gid, setuid and sticky bits dropped): ownership back to root,
// missing accounts and groups recreated, sudo's owners and modes, the
// homes and Hermes' virtualenv back to their users, boxadmin's .ssh and
// authorized_keys modes, the .hermes link, the hostname in /etc/hosts;
// host keys, /tmp modes, /run/sshd; the workspace seed by id and the
// workspace's ownership. Each checks before it changes anything, so a
// second boot changes nothing.
package boot
