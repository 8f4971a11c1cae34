"""Ask an installed Hermes how it resolves its approval settings.

hermes-box-agent runs this file with Hermes' own interpreter (its venv), as
the supervisor starts the gateway (the hermes user, the gateway's working
directory and environment, no managed directory of its own), after
provisioning and for every health report; its arguments are the mechanism
and the Hermes source tree.  It loads the .env files as the gateway does
first (gateway/run.py: hermes_cli.env_loader.load_hermes_dotenv), so what it
reports is what the gateway resolves.  It imports Hermes' code and prints
one JSON object on stdout:
the approval mode as tools.approval normalises it, the timeouts and cron mode
as tools.approval reads them, the reviewer settings (auxiliary.approval on
Hermes 0.19, approvals.gate for the patched 0.16/0.17), and, where Hermes has
plugins, whether the hermes-box-gate plugin is enabled, registered its hooks
and has its wraps in place; and which keys Hermes' managed scope pins
(HERMES_MANAGED_DIR, from 0.17.0).  It changes nothing on disk.
"""

import json
import os
import sys

PLUGIN = "hermes-box-gate"


def approvals(out):
    from tools import approval
    out["mode"] = approval._get_approval_mode()
    out["timeout"] = approval._get_approval_timeout()
    out["cronMode"] = approval._get_cron_approval_mode()
    config = approval._get_approval_config()
    if "gateway_timeout" in config:
        out["gatewayTimeout"] = config["gateway_timeout"]
    return approval, config


def reviewer_060(out, config):
    """The patched 0.16/0.17 reviewer's settings (approvals.gate)."""
    try:
        from tools import gated_approval
    except ImportError:
        return
    s = gated_approval.settings(config.get("gate"))
    out["reviewer"] = {"provider": s["provider"], "model": s["model"], "reasoningEffort": s["reasoning_effort"],
                       "serviceTier": s["service_tier"] or "", "timeout": s["timeout"], "enabled": s["enabled"],
                       "scope": s["scope"], "minConfidence": s["min_confidence"],
                       "maxRisk": s["auto_approve_max_risk"]}


def reviewer_aux(out):
    """Hermes' auxiliary.approval as agent.auxiliary_client resolves it, or as
    hermes_cli.config loads it where the client's dependencies are missing."""
    try:
        from agent import auxiliary_client as aux
        task = aux._get_auxiliary_task_config("approval")
        extra = aux._get_task_extra_body("approval")
        timeout = aux._get_task_timeout("approval")
        out["resolvedBy"] = "agent.auxiliary_client"
    except ImportError as exc:
        from hermes_cli.config import load_config
        task = (load_config().get("auxiliary") or {}).get("approval") or {}
        extra = dict(task.get("extra_body") or {})
        timeout = float(task.get("timeout", 30))
        out["resolvedBy"] = "hermes_cli.config (agent.auxiliary_client needs %s)" % exc.name
    reasoning = extra.get("reasoning") if isinstance(extra.get("reasoning"), dict) else {}
    out["reviewer"] = {"provider": str(task.get("provider") or ""), "model": str(task.get("model") or ""),
                       "reasoningEffort": str(reasoning.get("effort") or task.get("reasoning_effort") or ""),
                       "serviceTier": str(extra.get("service_tier") or ""), "timeout": float(timeout)}


def managed(out):
    """The keys the managed scope pins: as Hermes reads them (0.17.0 and
    later), or as the source patch's edits read them (0.16.0)."""
    try:
        from hermes_cli import managed_scope
        keys = managed_scope.managed_config_keys()
    except ImportError:
        try:
            from tools import gated_approval
        except ImportError:
            return
        keys = gated_approval.managed_keys()
    out["managedKeys"] = sorted(keys)


def load_env(tree):
    """The gateway's .env load, before anything reads the environment."""
    from pathlib import Path
    from hermes_cli.env_loader import load_hermes_dotenv
    from hermes_constants import get_hermes_home
    load_hermes_dotenv(hermes_home=get_hermes_home(), project_env=Path(tree) / ".env")


def managed_dir(out):
    """The managed directory Hermes reads (0.17.0 and later), or the source
    patch's reviewer module (0.16.0)."""
    try:
        from hermes_cli import managed_scope
        d = managed_scope.get_managed_dir()
    except ImportError:
        try:
            from tools import gated_approval
        except ImportError:
            return
        d = gated_approval.managed_dir()
    out["managedDir"] = str(d or "")


def code(out):
    """The code the config selects: the memory provider (its directory, as
    plugins.memory finds it) and the context engine."""
    from hermes_cli.config import load_config
    config = load_config()
    memory = config.get("memory") if isinstance(config.get("memory"), dict) else {}
    context = config.get("context") if isinstance(config.get("context"), dict) else {}
    name = str(memory.get("provider") or "")
    out["memoryProvider"] = name
    if name:
        from plugins.memory import find_provider_dir
        out["memoryProviderPath"] = str(find_provider_dir(name) or "")
    out["contextEngine"] = str(context.get("engine") or "compressor")


def plugin(out, approval, tree):
    from hermes_cli import plugins
    plugins.discover_plugins()
    loaded = plugins.get_plugin_manager()._plugins.get(PLUGIN)
    info = {"found": loaded is not None}
    if loaded is not None:
        info["enabled"] = bool(loaded.enabled)
        info["error"] = str(loaded.error or "")
        info["hooks"] = sorted(loaded.hooks_registered or [])
        module = loaded.module
        info["wrapped"] = bool(module is not None and module.installed(approval))
        manifest = loaded.manifest
        info["source"] = str(manifest.source or "")
        info["path"] = str(manifest.path or "")
        # Root's copy in the tree's plugins/, not one in HERMES_HOME overriding it.
        bundled = os.path.realpath(os.path.join(tree, "plugins", PLUGIN))
        info["bundled"] = bool(manifest.source == "bundled" and manifest.path
                               and os.path.realpath(str(manifest.path)) == bundled)
    out["plugin"] = info


def main():
    mechanism = sys.argv[1] if len(sys.argv) > 1 else ""
    tree = sys.argv[2] if len(sys.argv) > 2 else os.getcwd()
    load_env(tree)
    out = {"python": sys.version.split()[0], "mechanism": mechanism}
    approval, config = approvals(out)
    managed(out)
    managed_dir(out)
    code(out)
    if mechanism == "smart-plugin":
        reviewer_aux(out)
        plugin(out, approval, tree)
    else:
        reviewer_060(out, config)
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    sys.path.insert(0, os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.getcwd())
    main()
