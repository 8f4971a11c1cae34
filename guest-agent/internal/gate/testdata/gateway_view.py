"""What the Hermes gateway resolves, started as gateway/run.py starts.

The attack tests (attacks_test.go) run this with the installed tree's
interpreter, in the gateway's working directory and environment, after the
agent (as it could) has written its files. It loads the .env files with
Hermes' own loader as the gateway does at start and before each turn,
imports the memory provider an agent would (agent/agent_init.py:
memory.provider through plugins.memory.load_memory_provider), discovers the
plugins, and only then reads the approval mode: code the agent got loaded
runs before the mode is read, as it would in the gateway. Prints one JSON
object. Arguments: the Hermes tree.
"""

import json
import os
import sys
from pathlib import Path


def main(tree):
    from hermes_constants import get_hermes_home
    from hermes_cli.env_loader import load_hermes_dotenv
    load_hermes_dotenv(hermes_home=get_hermes_home(), project_env=Path(tree) / ".env")
    out = {"env": {k: os.environ.get(k, "") for k in ("HERMES_MANAGED_DIR", "PYTEST_CURRENT_TEST",
                                                     "HERMES_ENABLE_PROJECT_PLUGINS", "HERMES_GATE_AUDIT_LOG",
                                                     "GIT_CONFIG_COUNT")}}
    from hermes_cli.config import load_config
    memory = load_config().get("memory") or {}
    name = str(memory.get("provider") or "") if isinstance(memory, dict) else ""
    out["memoryProvider"] = name
    if name:
        from plugins.memory import load_memory_provider
        out["memoryLoaded"] = load_memory_provider(name) is not None
    from hermes_cli import plugins
    plugins.discover_plugins()
    loaded = plugins.get_plugin_manager()._plugins.get("hermes-box-gate")
    if loaded is not None:
        out["gatePlugin"] = {"enabled": bool(loaded.enabled), "path": str(loaded.manifest.path or ""),
                             "source": str(loaded.manifest.source or "")}
    from tools import approval
    out["mode"] = approval._get_approval_mode()
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(sys.argv[1]))
    main(sys.argv[1])
