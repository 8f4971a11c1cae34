"""Fixture for the gate tests: the lines of Hermes 0.19.0's approval flow
that the smart-plugin mechanism relies on, in a shape of their own."""
import os


def is_truthy_value(value):
    return value in ("1", "true")


_YOLO_MODE_FROZEN: bool = is_truthy_value(os.getenv("HERMES_YOLO_MODE", ""))


def _fire_approval_hook(hook_name: str, **kwargs) -> None:
    pass


def _normalize_approval_mode(mode) -> str:
    _VALID_MODES = ("manual", "smart", "off")
    return mode if mode in _VALID_MODES else "manual"


def _smart_approve(command: str, description: str) -> str:
    return "escalate"


def prompt_dangerous_approval(command: str, description: str,
                              timeout_seconds=None):
    return "deny"


def _await_gateway_decision(session_key: str, notify_cb, approval_data: dict,
                            *, surface: str = "gateway") -> dict:
    command = description = ""
    _fire_approval_hook(
        "pre_approval_request",
        command=command,
        description=description,
    )
    timeout = _get_approval_timeout()
    return {"resolved": False, "choice": None, "timeout": timeout}


def check_all_command_guards(command, session_key, notify_cb, combined_desc_for_llm, combined_desc):
    approval_data = {}
    if notify_cb:
        verdict = _smart_approve(command, combined_desc_for_llm)
        if verdict == "approve":
            # Approve this command only. Pattern-level persistence would let one
            return {"approved": True}
        if session_key:
            if verdict == "deny":
                approval_data["smart_denied"] = True
            decision = _await_gateway_decision(
                session_key, notify_cb, approval_data, surface="gateway"
            )
            return decision
    choice = prompt_dangerous_approval(
        command,
        combined_desc,
    )
    _fire_approval_hook(
        "post_approval_response",
        command=command,
        description=combined_desc,
        choice=choice,
    )
    return choice


def _get_approval_timeout():
    return 60


def _command_detection_variants(command: str):
    yield command


def detect_hardline_command(command: str) -> tuple:
    for command_variant in _command_detection_variants(command):
        variant_lower = command_variant.lower()
        for pattern_re, description in HARDLINE_PATTERNS_COMPILED:
            return (True, description)
    return (False, None)


def _match_user_deny_rule(command: str):
    for command_variant in _command_detection_variants(command):
        candidate = command_variant.lower().strip()
    return None


def detect_dangerous_command(command: str) -> tuple:
    for command_variant in _command_detection_variants(command):
        command_lower = command_variant.lower()
        for pattern_re, description in DANGEROUS_PATTERNS_COMPILED:
            return (True, description, description)
    return (False, None, None)


def _should_skip_container_guards(env_type, has_host_access=False):
    return env_type in ("docker", "singularity", "modal", "daytona") and not has_host_access


def check_dangerous_command(command, env_type, has_host_access=False):
    if _should_skip_container_guards(env_type, has_host_access=has_host_access):
        return {"approved": True, "message": None}

    # Hardline floor: commands with no recovery path
    return {"approved": False, "message": command}


def check_container_skip(command, env_type, has_host_access=False):
    # Docker stops skipping
    # once host paths are bind-mounted into the sandbox.
    if _should_skip_container_guards(env_type, has_host_access=has_host_access):
        return {"approved": True, "message": None}
    return {"approved": False, "message": command}


def check_execute_code_guard(code, env_type, has_host_access=False):
    if env_type == "vercel_sandbox":
        return {"approved": True, "message": None}
    if _should_skip_container_guards(env_type, has_host_access=has_host_access):
        return {"approved": True, "message": None}
    return {"approved": False, "message": code}


def _is_interactive_cli():
    return os.getenv("HERMES_INTERACTIVE", "") == "1"


def check_headless(command, is_cli, is_gateway, is_ask, pattern_key="execute_code", description="script"):
    if not is_cli and not is_gateway and not is_ask:
        # Cron sessions: respect cron_mode config
        return {"approved": True, "message": None}
    #   * Local non-interactive non-gateway: documented limitation above.
    if not is_gateway and not is_ask:
        return {"approved": True, "message": None}
    return {"approved": False, "message": command}


def _run_approval_gate(**kwargs):
    return kwargs


def check_dangerous_via_gate(description="flagged"):
    return _run_approval_gate(
        description=description,
        autoapprove_log_prefix=(
            "AUTO-APPROVED dangerous command in non-interactive non-gateway context"
        ),
    )
