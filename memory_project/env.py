"""Typed helpers that read settings from the environment."""

from __future__ import annotations

import os

#: Set by the web server's process (``memory_project.wsgi``): model calls are refused there
#: (``llm.runner``) and database statements are bounded (``memory_project.postgresql``).
WEB_PROCESS_FLAG = "MEMORY_WEB_PROCESS"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """Return the variable ``name`` or ``default`` when it is unset."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    """Return ``name`` read as a boolean (1/true/yes/on, 0/false/no/off).

    Raises:
        ValueError: the value is none of the accepted spellings.
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r} is not a boolean")


def env_int(name: str, default: int) -> int:
    """Return ``name`` read as an integer, or ``default`` when unset."""
    raw = os.environ.get(name)
    return default if raw in (None, "") else int(raw)


def env_float(name: str, default: float) -> float:
    """Return ``name`` read as a float, or ``default`` when unset."""
    raw = os.environ.get(name)
    return default if raw in (None, "") else float(raw)


def env_list(name: str, default: list[str]) -> list[str]:
    """Return ``name`` split on commas, blanks dropped, or ``default`` when unset."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """Return ``name`` (lower-cased) when it is one of ``choices``, ``default`` when unset.

    Raises:
        ValueError: the value is not one of ``choices`` (the message lists them).
    """
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ValueError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return value


def web_process() -> bool:
    """Whether this process serves the web API (:data:`WEB_PROCESS_FLAG` set)."""
    return bool(os.environ.get(WEB_PROCESS_FLAG))
