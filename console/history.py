"""A memory's history as people read it: what changed, not the stored dictionaries."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memories.models import MemoryHistory

#: Characters of one value shown before it is cut.
VALUE_CHARS = 80


@dataclass(frozen=True)
class HistoryLine:
    """One history row: when, what, who, the content change (old, new) when the content
    changed, the metadata keys added, changed and removed, and the details as text."""

    row: MemoryHistory
    content_change: tuple[str, str] | None
    metadata_changes: list[str]
    details: str


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def metadata_changes(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """``["+ key = value", "key: old → new", "− key"]`` between two metadata objects, keys
    sorted; an ``add`` row (no old metadata) lists its keys as added."""
    old, new = old or {}, new or {}
    lines: list[str] = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            lines.append(f"+ {key} = {_shown(new[key])}")
        elif key not in new:
            lines.append(f"− {key}")
        elif old[key] != new[key]:
            lines.append(f"{key}: {_shown(old[key])} → {_shown(new[key])}")
    return lines


def history_lines(rows: list[MemoryHistory]) -> list[HistoryLine]:
    """``rows`` (oldest first) as :class:`HistoryLine`s."""
    lines = []
    for row in rows:
        old, new = row.old_content, row.new_content
        change = (old, new) if old is not None and new is not None and old != new else None
        details = ", ".join(f"{k}: {_shown(v)}" for k, v in sorted((row.details or {}).items()))
        lines.append(HistoryLine(
            row=row,
            content_change=change,
            metadata_changes=[] if row.new_metadata is None else metadata_changes(
                row.old_metadata, row.new_metadata),
            details=details))
    return lines
