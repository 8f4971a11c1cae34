"""Fixture: the auxiliary-client lines the gate relies on and edits."""
from typing import Any, Dict

_DEFAULT_AUX_TIMEOUT = 30.0


def _get_auxiliary_task_config(task: str) -> Dict[str, Any]:
    return {}


def _get_task_timeout(task: str, default: float = _DEFAULT_AUX_TIMEOUT) -> float:
    return default


def _get_task_extra_body(task):
    task_config = _get_auxiliary_task_config(task)
    if "reasoning" not in task_config:
        effort = task_config.get("reasoning_effort")
        return {"reasoning": {"effort": effort}}
    return {}


def _responses_kwargs(extra_body, resp_kwargs):
    if extra_body:
        if True:
            if True:
                if True:
                    resp_kwargs["include"] = ["reasoning.encrypted_content"]

        # Tools support for auxiliary callers (e.g. skills_hub) that pass function schemas
    return resp_kwargs


_CODEX_AUX_BASE_URL = "https://chatgpt.com/backend-api/codex"


def _pool_runtime_base_url(entry, fallback=""):
    return fallback


def _try_codex(entry):
    """The lines of Hermes' Codex client resolution the gate edits."""
    base_url = ""
    if entry is not None:
        if entry:
            base_url = _pool_runtime_base_url(entry, _CODEX_AUX_BASE_URL) or _CODEX_AUX_BASE_URL
    return base_url
