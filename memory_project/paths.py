"""Where the project is and where its data goes (``MEMORY_VAR_DIR``, default ``./var``):
shared by the settings modules."""

from __future__ import annotations

from pathlib import Path

from memory_project.env import env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("MEMORY_VAR_DIR", str(BASE_DIR / "var")))
