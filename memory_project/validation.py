"""Input checks shared by every serializer."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

# Lone UTF-16 surrogates: JSON may spell them ("\ud800"), UTF-8 (and PostgreSQL) cannot.
_SURROGATE = re.compile("[\ud800-\udfff]")

# OpenAPI ``pattern``s, written in the regex syntax that ECMA-262 (what JSON Schema names),
# Python and Rust's regex crate (used by validators such as schemathesis') all read alike: a
# pattern one of them refuses is silently ignored by some tools. Unpaired surrogates are not in
# the patterns (Rust refuses ``\ud800``); they are not Unicode text, so ``type: string``
# already leaves them out.

#: Text the database can store: no NUL (``unstorable_text``).
STORABLE_TEXT_PATTERN = r"^[^\x00]*$"
#: The characters Python's ``str.isspace`` (and so ``str.strip``) treats as whitespace.
_WHITESPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: A layer identifier (``tenants.layers``): no NUL and not blank (at least one character
#: that ``str.strip`` keeps).
IDENTIFIER_PATTERN = rf"^[^\x00]*[^\x00{_WHITESPACE}][^\x00]*$"
#: An id that names its object in a URL (``/api/v1/orgs/{orgId}``): an identifier without
#: "/" (``tenants.services`` refuses one, which could never be fetched or deleted).
ADDRESSABLE_ID_PATTERN = rf"^[^\x00/]*[^\x00/{_WHITESPACE}][^\x00/]*$"


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


class StrictFloatField(serializers.FloatField):
    """A ``FloatField`` that accepts JSON numbers only: DRF's turns ``true`` into ``1.0`` and
    ``"0.5"`` into ``0.5``, so a client's type mistake would pass unnoticed. DRF's own checks
    then refuse what is not finite or does not fit a float (a 400-digit integer)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise serializers.ValidationError("Must be a number.")
        return float(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    """A ``BooleanField`` that accepts JSON ``true``/``false`` only (DRF's also takes
    ``0``, ``1``, ``"yes"``, ...)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            raise serializers.ValidationError("Must be true or false.")
        return data
