"""Fixture for the patch tests: a few lines shaped like Hermes' approval flow."""
import logging

logger = logging.getLogger(__name__)


def _get_approval_config():
    return {}


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
