#!/bin/sh
# Guest-side helper of the end-to-end test; the test copies it into the VM
# with `smolvm machine cp` and uses it as the packed machine's entrypoint.
set -eu
case "${1:-}" in
exit) exit "$2" ;;
serve) exec python3 -m http.server "$2" --bind 0.0.0.0 --directory /tmp ;;
entrypoint)
  {
    echo "greeting=${E2E_GREETING:-}"
    printf 'secret_sha256=%s\n' "$(printf %s "${E2E_SECRET:-}" | sha256sum | cut -d' ' -f1)"
  } >/run/e2e-entrypoint.tmp
  mv /run/e2e-entrypoint.tmp /run/e2e-entrypoint
  mkdir -p /run/sshd
  exec /usr/sbin/sshd -D -e
  ;;
*)
  echo "usage: e2e-guest exit N | serve PORT | entrypoint" >&2
  exit 2
  ;;
esac
