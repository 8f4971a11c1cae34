# shellcheck shell=sh
# hermes-box: the secrets mapped in secret-env.txt, for the hermes user's
# login shells. The agent writes the file on tmpfs at every start; it is
# readable by that user only.
if [ -r /run/hermes-box-secrets/hermes/env.sh ]; then
  # shellcheck source=/dev/null
  . /run/hermes-box-secrets/hermes/env.sh
fi
