"""Fixture: the plugin-manager lines of Hermes 0.19.0 the gate relies on."""
from pathlib import Path
from typing import Callable

VALID_HOOKS = {
    "pre_tool_call",
    "pre_approval_request",
    "post_approval_response",
}


def get_bundled_plugins_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "plugins"


class PluginContext:
    def register_hook(self, hook_name: str, callback: Callable) -> None:
        pass


class PluginManager:
    def _discover_and_load_inner(self) -> None:
        repo_plugins = get_bundled_plugins_dir()
        enabled = _get_enabled_plugins()  # None = opt-in default (nothing enabled)
        return repo_plugins, enabled


class _Scanner:
    def _scan_directory(self, path, source):
        return []

    def scan(self, user_dir, project_dir, enable_project):
        user_manifests = self._scan_directory(user_dir, source="user")
        if enable_project:
            project_manifests = self._scan_directory(project_dir, source="project")
            return user_manifests + project_manifests
        return user_manifests
