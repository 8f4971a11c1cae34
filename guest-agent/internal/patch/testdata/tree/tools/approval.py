"""Fixture for the patch tests: a few lines shaped like Hermes' approval flow."""
import logging
import os

logger = logging.getLogger(__name__)


def is_truthy_value(value):
    return value in ("1", "true")


_YOLO_MODE_FROZEN: bool = is_truthy_value(os.getenv("HERMES_YOLO_MODE", ""))


import re

HARDLINE_PATTERNS_COMPILED = [(re.compile(r"(^|\n)\s*reboot\b"), "system shutdown/reboot")]
DANGEROUS_PATTERNS_COMPILED = [(re.compile(r"(^|\n)\s*sudo\b"), "superuser command")]


def detect_hardline_command(command: str) -> tuple:
    normalized = command.lower()
    for pattern_re, description in HARDLINE_PATTERNS_COMPILED:
        if pattern_re.search(normalized):
            return (True, description)
    return (False, None)


def _hardline_block_result(description):
    return {"approved": False, "message": description}


def detect_dangerous_command(command: str) -> tuple:
    command_lower = command.lower()
    for pattern_re, description in DANGEROUS_PATTERNS_COMPILED:
        if pattern_re.search(command_lower):
            pattern_key = description
            return (True, pattern_key, description)
    return (False, None, None)


# =========================================================================
# Per-session approval state
# =========================================================================


def load_config():
    return {}


def cfg_get(config, *keys, default=None):
    for key in keys:
        config = config.get(key, {}) if isinstance(config, dict) else {}
    return config or default


def _get_approval_config():
    try:
        config = load_config()
        return config.get("approvals", {}) or {}
    except Exception:
        return {}


def _get_cron_approval_mode():
    try:
        config = load_config()
        mode = str(cfg_get(config, "approvals", "cron_mode", default="deny")).lower().strip()
        return "approve" if mode == "approve" else "deny"
    except Exception:
        return "deny"


def load_permanent_allowlist():
    try:
        config = load_config()
        patterns = set(config.get("command_allowlist", []) or [])
        return patterns
    except Exception:
        return set()


def _normalize_approval_mode(mode):
    if isinstance(mode, str):
        normalized = mode.strip().lower()
        return normalized or "manual"
    return "manual"


def _gateway_wait_seconds():
    timeout = _get_approval_config().get("gateway_timeout", 300)
    return timeout


def check_all_command_guards(command, env_type, approval_mode="manual"):
    warnings = [("k", "flagged", False)]
    if not warnings:
        return {"approved": True, "message": None}

    # --- Phase 2.5: Smart approval (auxiliary LLM risk assessment) ---
    if approval_mode == "smart":
        return {"approved": True, "message": None}

    # Combine descriptions for a single approval prompt
    combined_desc = "; ".join(desc for _, desc, _ in warnings)
    has_tirith = False
    approval_data = {
                "command": command,
                "allow_permanent": not has_tirith,
    }
    return {"approved": False, "data": approval_data, "description": combined_desc}


def check_dangerous_command(command, env_type):
    if env_type in {"docker", "singularity", "modal", "daytona"}:
        return {"approved": True, "message": None}

    # Hardline floor: commands with no recovery path
    return {"approved": False, "message": command}


def check_container_skip(command, env_type):
    # Skip containers for both checks
    if env_type in {"docker", "singularity", "modal", "daytona"}:
        return {"approved": True, "message": None}
    return {"approved": False, "message": command}


def check_execute_code_guard(code, env_type):
    if env_type in {"docker", "singularity", "modal", "daytona", "vercel_sandbox"}:
        return {"approved": True, "message": None}
    return {"approved": False, "message": code}


def env_var_enabled(name):
    return os.getenv(name, "") in ("1", "true")


def check_headless(command, is_cli, is_gateway, is_ask):
    if not is_cli and not is_gateway and not is_ask:
        # Cron sessions: respect cron_mode config
        return {"approved": True, "message": None}
    return {"approved": False, "message": command}


def check_headless_execute(code, is_gateway, is_ask, pattern_key="execute_code", description="script"):
    #   * Local non-interactive non-gateway: documented limitation above.
    if not is_gateway and not is_ask:
        return {"approved": True, "message": None}
    return {"approved": False, "message": code}


def check_headless_dangerous(command, pattern_key="k", description="flagged"):
    if not command:
        logger.warning(
            "AUTO-APPROVED dangerous command in non-interactive non-gateway context "
            "(pattern: %s)", description,
        )
    return {"approved": True, "message": None}
