"""Fixture: the lines of Hermes' .env loader (0.16.0, 0.17.0, 0.19.0) the gate edits."""
import os
from pathlib import Path

from dotenv import load_dotenv


def load_hermes_dotenv(*, hermes_home=None, project_env=None):
    loaded: list[Path] = []

    home_path = Path(hermes_home or os.getenv("HERMES_HOME", Path.home() / ".hermes"))
    user_env = home_path / ".env"
    if user_env.exists():
        load_dotenv(dotenv_path=user_env, override=True, encoding="utf-8")
        loaded.append(user_env)

    return loaded
