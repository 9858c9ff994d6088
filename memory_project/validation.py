"""Input checks shared by every serializer."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def no_nul(value: Any) -> Any:
    """Reject NUL characters anywhere in ``value`` (strings, lists, dict keys and values).

    PostgreSQL text cannot store ``\\x00``; rejecting it up front turns what would be a
    database error into a clear 400.

    Raises:
        serializers.ValidationError: a NUL character was found.
    """
    if _has_nul(value):
        raise serializers.ValidationError("NUL characters (\\u0000) are not allowed.")
    return value


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False
