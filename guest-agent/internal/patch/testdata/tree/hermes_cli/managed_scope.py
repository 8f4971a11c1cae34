"""Fixture: the lines of Hermes' managed scope (0.17.0, 0.19.0) the gate relies on."""
from pathlib import Path
import os

_DEFAULT_MANAGED_DIR = Path("/etc/hermes")


def get_managed_dir():
    override = os.environ.get("HERMES_MANAGED_DIR", "").strip()
    return Path(override) if override else _DEFAULT_MANAGED_DIR
