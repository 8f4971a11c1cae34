# shellcheck shell=sh
# Written by hermes-box-agent provision: where Hermes and Codex keep their state.
export HERMES_HOME=/workspace/hermes-home
export CODEX_HOME=/workspace/codex-home
export CODEX_INSTALL_DIR="$CODEX_HOME/bin"
export PATH="$CODEX_HOME/bin:/usr/local/bin:$PATH"
if [ -d /workspace/work ] && [ -r /workspace/work ]; then
	cd /workspace/work || true
fi
