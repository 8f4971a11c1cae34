"""Fixture: the memory-provider lines of Hermes (0.16.0, 0.17.0, 0.19.0) the gate edits."""
from pathlib import Path
from typing import Optional


def _get_user_plugins_dir() -> Optional[Path]:
    try:
        from hermes_constants import get_hermes_home
        d = get_hermes_home() / "plugins"
        return d if d.is_dir() else None
    except Exception:
        return None
