"""How seed 003's agent memories sit in this service's one memory store.

Seed 003 keys an agent memory by ``agentName#projectId`` (partition) and ``createdAt`` (sort)
in a DynamoDB table. Here an agent memory is a memory of the **agent** layer: ``agent_id`` is
the agent's name, ``project_id`` the project, ``user_id`` the user the agent works for, or
:data:`SHARED_USER` when the memories are the agent's own for the whole project (seed 003's
case); its id is the memory's UUIDv7, so ids sort by creation time as ``createdAt`` does.
Seed 003's ``source`` is the custom metadata field ``agentSource``, beside seed 001's
``source.type`` (:data:`SOURCE_TYPES`).
"""

from __future__ import annotations

import re
from typing import Any

from memory_project.errors import InvalidInput, MissingIdentifier

#: The ``userId`` of the agent layer for memories that belong to an agent and a project
#: rather than to one user (the agent layer requires a userId; seed 001 matrix).
SHARED_USER = "_shared"
#: Seed 003's sources → seed 001's ``MemorySource.type``.
SOURCE_TYPES: dict[str, str] = {"extraction": "conversation", "manual": "manual",
                                "system": "import"}
#: Memories returned per agent+project (seed 003 "Memory cap enforcement").
MEMORY_CAP = 50
#: An agent name: a letter or digit, then letters, digits, ``.``, ``_``, ``-`` and ``:``.
AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$")


def validate_agent_name(name: Any) -> str:
    """``name`` when it is a valid agent name (:data:`AGENT_NAME`).

    Raises:
        InvalidInput: not a string, empty, over 128 characters, or holding a slash, a space
            or another character outside the pattern.
    """
    if not isinstance(name, str) or not AGENT_NAME.match(name):
        shown = str(name)[:60]
        raise InvalidInput(
            f"Invalid agent name {shown!r}: 1 to 128 letters, digits, '.', '_', '-' or ':', "
            "starting with a letter or digit.", details={"pattern": AGENT_NAME.pattern})
    return name


def validate_project_id(value: Any) -> Any:
    """``value``, refusing a missing project id (its form is checked with the other
    identifiers, ``LayerIdentifiers.from_mapping``).

    Raises:
        MissingIdentifier: absent or empty.
    """
    if value is None or value == "":
        raise MissingIdentifier("projectId is required.", details={"required": ["projectId"]})
    return value


def validate_source(value: Any) -> str:
    """``value`` when it is one of seed 003's sources.

    Raises:
        InvalidInput: anything else.
    """
    if value not in SOURCE_TYPES:
        raise InvalidInput(f"Unknown source {str(value)[:40]!r}.",
                           details={"allowed": list(SOURCE_TYPES)})
    return str(value)


def metadata_for(source: str) -> dict[str, Any]:
    """The metadata an agent memory from ``source`` is stored with."""
    return {"source": {"type": SOURCE_TYPES[source]}, "agentSource": source}


def source_of(metadata: dict[str, Any]) -> str:
    """Seed 003's source of a stored memory: its ``agentSource``, else derived from seed
    001's ``source.type`` (a memory added to the agent layer through ``/api/v1/memories``)."""
    given = metadata.get("agentSource")
    if given in SOURCE_TYPES:
        return str(given)
    kind = (metadata.get("source") or {}).get("type") if isinstance(
        metadata.get("source"), dict) else None
    return {"manual": "manual", "conversation": "extraction"}.get(str(kind), "system")
