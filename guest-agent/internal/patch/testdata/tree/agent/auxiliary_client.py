"""Fixture for the patch tests: a few lines shaped like Hermes' Codex adapter."""


class _CodexCompletionsAdapter:
    def create(self, **kwargs):
        resp_kwargs = {}
        extra_body = kwargs.get("extra_body") or {}
        if isinstance(extra_body, dict):
            reasoning_cfg = extra_body.get("reasoning")
            if isinstance(reasoning_cfg, dict):
                if reasoning_cfg.get("effort"):
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
