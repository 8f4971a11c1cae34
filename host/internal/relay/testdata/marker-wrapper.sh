#!/bin/sh
# Remote command wrapper for the relay's OpenSSH integration test.
# Usage: marker-wrapper.sh MARKER COMMAND [ARG...]
# Creating MARKER proves that sshd ran the remote command; the test removes
# it and then checks that a refused connection never created it again.
set -eu
marker=$1
shift
: >"$marker"
exec "$@"
