#!/usr/bin/env bash
# Stand-in for the Hermes installer, served by the tests from loopback. It
# records every stage it runs and leaves behind what the real installer
# leaves, under the test root (derived from HERMES_HOME).
set -euo pipefail

stage="" commit="" home=""
while [ $# -gt 0 ]; do
	case $1 in
	--stage) stage=$2; shift 2 ;;
	--commit) commit=$2; shift 2 ;;
	--hermes-home) home=$2; shift 2 ;;
	--non-interactive) shift ;;
	*) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
if [ "$home" != "${HERMES_HOME:-}" ]; then
	echo "install.sh: --hermes-home $home differs from HERMES_HOME" >&2
	exit 2
fi
root=${HERMES_HOME%/workspace/hermes-home}
src=$root/usr/local/lib/hermes-agent
echo "$stage $commit" >>"$HERMES_HOME/installer-stages.log"
case $stage in
repository)
	mkdir -p "$src/.git" "$src/tests" "$src/website"
	echo "$commit" >"$src/.git/HEAD"
	;;
venv)
	mkdir -p "$src/venv/bin"
	printf '#!/bin/sh\nexit 0\n' >"$src/venv/bin/python"
	chmod 0755 "$src/venv/bin/python"
	;;
python-deps) ;;
path)
	mkdir -p "$root/usr/local/bin"
	printf '#!/bin/sh\nexec %s/venv/bin/hermes "$@"\n' "$src" >"$root/usr/local/bin/hermes"
	chmod 0755 "$root/usr/local/bin/hermes"
	;;
config)
	printf 'OPENAI_API_KEY=\n' >"$HERMES_HOME/.env"
	chmod 0600 "$HERMES_HOME/.env"
	;;
complete) echo git >"$src/.install_method" ;;
*)
	echo "install.sh: stage $stage is not expected" >&2
	exit 3
	;;
esac
