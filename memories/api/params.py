"""Query parameters shared by the memory endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request

from memory_project.errors import InvalidInput


def int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be an integer.") from None


def bool_param(request: Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter: ``true``/``1`` or ``false``/``0``.

    Raises:
        InvalidInput: any other value.
    """
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise InvalidInput(f"{name} must be true or false.", details={"parameter": name})


def only_params(request: Request, allowed: set[str]) -> None:
    """Refuse query parameters other than ``allowed`` (400 ``INVALID_INPUT``)."""
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        raise InvalidInput(f"Unknown parameter(s): {', '.join(unknown)}.",
                           details={"allowed": sorted(allowed)})


def validated(serializer: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The request body checked by ``serializer`` (no query parameters allowed).

    Raises:
        InvalidInput: a query parameter was given.
        ValidationError: the body does not fit (400 ``INVALID_INPUT`` in the envelope).
    """
    only_params(request, set())
    body = serializer(data=request.data)
    body.is_valid(raise_exception=True)
    return dict(body.validated_data)
