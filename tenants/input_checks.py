"""Checks of a JSON document a client sends (a settings patch, a policy definition) that
raise the API's ``INVALID_INPUT`` with one wording everywhere."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from memory_project.errors import InvalidInput
from memory_project.validation import unstorable_text


def reject_unknown_keys(values: Mapping[str, Any], allowed: Collection[str], what: str) -> None:
    """Refuse ``values`` when it has a key outside ``allowed``.

    Raises:
        InvalidInput: ``"Unknown <what>(s): <keys, sorted>."``, ``details.allowed`` the sorted
            ``allowed`` keys.
    """
    unknown = set(values) - set(allowed)
    if unknown:
        raise InvalidInput(f"Unknown {what}(s): {', '.join(sorted(unknown))}.",
                           details={"allowed": sorted(allowed)})


def reject_unstorable(value: Any, what: str) -> None:
    """Refuse ``value`` when text in it cannot be stored (``unstorable_text``).

    Raises:
        InvalidInput: ``"Invalid <what>: <why>"``.
    """
    problem = unstorable_text(value)
    if problem:
        raise InvalidInput(f"Invalid {what}: {problem}")
