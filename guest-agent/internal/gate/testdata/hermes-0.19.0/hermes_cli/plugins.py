"""Fixture: the plugin-manager lines of Hermes 0.19.0 the gate relies on."""
from typing import Callable

VALID_HOOKS = {
    "pre_tool_call",
    "pre_approval_request",
    "post_approval_response",
}


class PluginContext:
    def register_hook(self, hook_name: str, callback: Callable) -> None:
        pass


class PluginManager:
    def _discover_and_load_inner(self) -> None:
        user_dir = get_hermes_home() / "plugins"
        enabled = _get_enabled_plugins()  # None = opt-in default (nothing enabled)
        return user_dir, enabled
