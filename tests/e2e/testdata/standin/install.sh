#!/usr/bin/env bash
# Stand-in for the Hermes installer, served to the VM by the end-to-end test
# from a loopback HTTPS server. Run by `hermes-box-agent provision` as root,
# one stage at a time, it leaves what the agent and boot rely on: the source
# tree and its venv python (which can import discord), the `hermes` command
# (whose `gateway run --replace` is a long-running process), config.yaml and
# .env. It downloads nothing: where the real installer clones Hermes at the
# pinned commit, this one unpacks the real tree of that commit, which the test
# copied into the guest with its pins (the export of ../shared/hermes-trees,
# its digest checked here, its .commit the pinned one); the venv's
# interpreter is the system Python, whose Debian packages stand in for the
# dependencies the real installer fetches from PyPI.
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
[ "$home" = "${HERMES_HOME:-}" ] || { echo "install.sh: --hermes-home differs from HERMES_HOME" >&2; exit 2; }
src=/usr/local/lib/hermes-agent
echo "$stage $commit" >>"$HERMES_HOME/installer-stages.log"

case $stage in
repository)
	tree=@HERMES_TREE@
	echo "@HERMES_TREE_SHA256@  $tree" | sha256sum --check --quiet - || { echo "install.sh: $tree is not the tree the test pinned" >&2; exit 4; }
	mkdir -p "$src"
	tar -xzf "$tree" -C "$src" --strip-components=1 --no-same-owner
	[ "$(cat "$src/.commit")" = "$commit" ] || { echo "install.sh: the tree holds commit $(cat "$src/.commit"), not $commit" >&2; exit 4; }
	mkdir -p "$src/.git" "$src/tests"
	echo "$commit" >"$src/.git/HEAD"
	;;
venv)
	mkdir -p "$src/venv/bin" "$src/venv/lib/site-packages"
	cat >"$src/venv/bin/python" <<'PY'
#!/bin/sh
# Stand-in venv interpreter: the system python with the venv's packages.
export PYTHONPATH=/usr/local/lib/hermes-agent/venv/lib/site-packages${PYTHONPATH:+:$PYTHONPATH}
exec /usr/bin/python3 "$@"
PY
	chmod 0755 "$src/venv/bin/python"
	;;
python-deps)
	mkdir -p "$src/venv/lib/site-packages/discord"
	echo '"""Stand-in for discord.py: importable, nothing more."""' >"$src/venv/lib/site-packages/discord/__init__.py"
	;;
path)
	cat >"$src/venv/bin/hermes" <<'SH'
#!/bin/bash
# Stand-in for the Hermes CLI: --version, `mcp test NAME`, and
# `gateway run --replace`, which runs until SIGTERM and logs a heartbeat;
# `config` is the real tree's own (hermes_cli.main).
set -u
case "${1:-} ${2:-}" in
"--version "*) echo "Hermes Agent stand-in (commit $(cat /usr/local/lib/hermes-agent/.commit))" ;;
"config "*) cd /usr/local/lib/hermes-agent && exec venv/bin/python -m hermes_cli.main "$@" ;;
"gateway run")
	echo "hermes stand-in gateway: running as $(id -un) in $PWD, HERMES_HOME=${HERMES_HOME:-}"
	trap 'echo "hermes stand-in gateway: stopping"; exit 0' TERM INT
	while :; do
		sleep 30 &
		wait $!
		echo "hermes stand-in gateway: heartbeat"
	done
	;;
"mcp test") exec /usr/bin/python3 /usr/local/lib/hermes-agent/mcp_test_standin.py "$@" ;;
*) echo "hermes stand-in: unsupported command: $*" >&2; exit 2 ;;
esac
SH
	chmod 0755 "$src/venv/bin/hermes"
	# `hermes mcp test NAME`: the agent's own stand-in, which probes the
	# configured server as Hermes does (filled in by the test).
	cat >"$src/mcp_test_standin.py" <<'MCPTESTSTANDIN'
@HERMES_MCP_TEST_STANDIN@
MCPTESTSTANDIN
	ln -sfn "$src/venv/bin/hermes" /usr/local/bin/hermes
	;;
config)
	printf 'model:\n  provider: stand-in\n' >"$HERMES_HOME/config.yaml"
	[ -e "$HERMES_HOME/.env" ] || : >"$HERMES_HOME/.env"
	chmod 0600 "$HERMES_HOME/.env"
	;;
complete) echo "e2e-stand-in" >"$src/.install_method" ;;
*) echo "install.sh: unexpected stage $stage" >&2; exit 3 ;;
esac
