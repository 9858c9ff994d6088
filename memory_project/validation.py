"""Input checks shared by every serializer."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

# Lone UTF-16 surrogates: JSON may spell them ("\ud800"), UTF-8 (and PostgreSQL) cannot.
_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable_text(value: Any) -> str | None:
    """Why ``value`` cannot be stored as PostgreSQL text/jsonb, or ``None`` when it can.

    Walks strings, lists, tuples and dict keys and values without recursion, so arbitrarily
    deep input cannot exhaust the stack.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "NUL characters (\\u0000) are not allowed."
            if _SURROGATE.search(item):
                return "Unpaired surrogate characters (\\ud800-\\udfff) are not allowed."
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


def no_nul(value: Any) -> Any:
    """Reject text PostgreSQL cannot store anywhere in ``value`` (strings, lists, dict keys
    and values): NUL characters and unpaired surrogates.

    PostgreSQL text cannot store ``\\x00`` and UTF-8 cannot encode a lone surrogate;
    rejecting them up front turns what would be a database error into a clear 400.

    Raises:
        serializers.ValidationError: such a character was found.
    """
    problem = unstorable_text(value)
    if problem:
        raise serializers.ValidationError(problem)
    return value


class StrictCharField(serializers.CharField):
    """A ``CharField`` that accepts JSON strings only (DRF's turns ``5`` into ``"5"``)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Not a valid string.")
        return str(super().to_internal_value(data))


#: OpenAPI schema of a JSON object field (any keys, not null).
JSON_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}


@extend_schema_field(JSON_OBJECT)
class JsonObjectField(serializers.JSONField):
    """A JSON object (``{}``); ``null`` and other JSON types are refused."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be a JSON object.")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A ``BooleanField`` that accepts JSON ``true``/``false`` only (DRF's also takes
    ``0``, ``1``, ``"yes"``, ...)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            raise serializers.ValidationError("Must be true or false.")
        return data
