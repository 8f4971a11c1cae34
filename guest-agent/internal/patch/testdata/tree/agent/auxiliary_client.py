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
