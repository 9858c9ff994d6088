"""Metadata filters of seed 001 (``MetadataFilter``): tags (OR), source type, knowledge
pointers, and custom fields with equality, contains and range operators; the task a memory
was written for (seed 004 ``TaskID``, the ``task_id`` column), matched exactly; and a range
of the memory's time (``occurredAt``: ``occurred_at``, else ``created_at``).

JSON form (search and recall body, ``filter``)::

    {"tags": ["a", "b"], "sourceType": "manual", "hasKnowledgePointer": true, "taskId": "t1",
     "custom": {"priority": 3, "topic": {"contains": "db"}, "score": {"gte": 0.5, "lt": 1}},
     "occurredAt": {"gte": "2023-06-01", "lt": "2023-07-01"}}

Query-string form (list): ``tags=a,b&sourceType=manual&hasKnowledgePointer=true&taskId=t1&
custom.priority=3&custom.topic__contains=db&custom.score__gte=0.5&
occurredAt__gte=2023-06-01``. Dotted names reach nested fields (``custom.owner.team=core``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db.models import CharField, Func, Q, QuerySet
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Coalesce
from django.utils.dateparse import parse_datetime

from memory_project.errors import InvalidInput
from memory_project.validation import IDENTIFIER_PATTERN, unstorable_text

SOURCE_TYPES = ("conversation", "tool_result", "knowledge_sync", "manual", "import")
OPERATORS = ("eq", "contains", "gt", "gte", "lt", "lte")
RANGE_OPERATORS = ("gt", "gte", "lt", "lte")
_FIELD_RE = re.compile(r"^[A-Za-z0-9_\-]{1,64}(\.[A-Za-z0-9_\-]{1,64}){0,4}$")
MAX_CONDITIONS = 20
#: The longest ``taskId`` (the ``task_id`` column's length, as for the layer identifiers).
MAX_TASK_ID_LENGTH = 255
_TASK_ID_RE = re.compile(IDENTIFIER_PATTERN)


@dataclass(frozen=True)
class Condition:
    """One custom-field condition: ``path`` (dotted), ``op`` (one of OPERATORS), ``value``."""

    path: tuple[str, ...]
    op: str
    value: Any


@dataclass(frozen=True)
class MetadataFilter:
    """A parsed filter; an empty one matches everything."""

    tags: tuple[str, ...] = ()
    source_type: str | None = None
    has_knowledge_pointer: bool | None = None
    custom: tuple[Condition, ...] = field(default_factory=tuple)
    #: Only memories of this task (``task_id`` equal); ``None``: any task or none.
    task_id: str | None = None
    #: Bounds of the memory's time (``occurred_at``, else ``created_at``): ``(op, moment)``
    #: with ``op`` one of :data:`RANGE_OPERATORS` and ``moment`` aware.
    occurred: tuple[tuple[str, datetime], ...] = ()

    @classmethod
    def from_json(cls, data: Any) -> MetadataFilter:
        """Parse the JSON form.

        Raises:
            InvalidInput: wrong types, unknown keys, operators or source types.
        """
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise InvalidInput("filter must be an object.")
        unknown = set(data) - {"tags", "sourceType", "hasKnowledgePointer", "taskId", "custom",
                               "occurredAt"}
        if unknown:
            raise InvalidInput(f"Unknown filter key(s): {', '.join(sorted(unknown))}.")
        custom = data.get("custom") or {}
        if not isinstance(custom, dict):
            raise InvalidInput("filter.custom must be an object.")
        conditions: list[Condition] = []
        for name, spec in custom.items():
            path = _path(name)
            if isinstance(spec, dict) and spec and set(spec) <= set(OPERATORS):
                conditions.extend(_condition(path, op, v) for op, v in spec.items())
            else:
                conditions.append(_condition(path, "eq", spec))
        return cls(
            tags=_tags(data.get("tags")),
            source_type=_source_type(data.get("sourceType")),
            has_knowledge_pointer=_bool(data.get("hasKnowledgePointer"), "hasKnowledgePointer"),
            custom=_limit(conditions),
            task_id=task_id_value(data.get("taskId"), name="filter.taskId"),
            occurred=_time_bounds(data.get("occurredAt")),
        )

    @classmethod
    def from_query_params(cls, params: Any) -> MetadataFilter:
        """Parse the query-string form from a ``QueryDict``.

        Raises:
            InvalidInput: as :meth:`from_json`.
        """
        tags: list[str] = []
        for raw in params.getlist("tags"):
            tags.extend(t for t in raw.split(",") if t)
        conditions: list[Condition] = []
        bounds: dict[str, Any] = {}
        for key in params:
            if key.partition("__")[0] == "occurredAt":
                op = key.partition("__")[2]
                if not op or len(params.getlist(key)) > 1:
                    raise InvalidInput("Give occurredAt as occurredAt__gt, __gte, __lt or __lte, "
                                       "each once.", details={"field": key})
                bounds[op] = params.get(key)
                continue
            if not key.startswith("custom."):
                continue
            name, separator, op = key.removeprefix("custom.").partition("__")
            if not separator:
                op = "eq"
            for raw in params.getlist(key):
                conditions.append(_condition(_path(name), op, _scalar(raw)))
        kp = params.get("hasKnowledgePointer")
        task_ids = params.getlist("taskId")
        if len(task_ids) > 1:
            raise InvalidInput("taskId must be given once.")
        return cls(
            tags=_tags(tags or None),
            source_type=_source_type(params.get("sourceType")),
            has_knowledge_pointer=None if kp is None else _bool(_scalar(kp), "hasKnowledgePointer"),
            custom=_limit(conditions),
            task_id=task_id_value(task_ids[0] if task_ids else None, name="taskId"),
            occurred=_time_bounds(bounds or None),
        )

    def apply(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """``queryset`` narrowed to memories whose ``metadata``, ``task_id`` and time
        (``occurred_at``, else ``created_at``) match this filter."""
        if self.task_id is not None:
            queryset = queryset.filter(task_id=self.task_id)
        if self.occurred:
            queryset = queryset.alias(_occurred=Coalesce("occurred_at", "created_at")).filter(
                **{f"_occurred__{op}": moment for op, moment in self.occurred})
        if self.tags:
            any_tag = Q()
            for tag in self.tags:
                any_tag |= Q(metadata__contains={"tags": [tag]})
            queryset = queryset.filter(any_tag)
        if self.source_type:
            queryset = queryset.filter(metadata__contains={"source": {"type": self.source_type}})
        if self.has_knowledge_pointer is True:
            queryset = queryset.filter(metadata__has_key="knowledgePointer")
        elif self.has_knowledge_pointer is False:
            queryset = queryset.exclude(metadata__has_key="knowledgePointer")
        for i, cond in enumerate(self.custom):
            if cond.op == "eq":
                queryset = queryset.filter(metadata__contains=_nest(cond.path, cond.value))
                continue
            alias = f"_meta_{i}"
            expr: Any = "metadata"
            for part in cond.path:
                expr = KeyTransform(part, expr)
            queryset = queryset.alias(**{alias: expr})
            if cond.op == "contains":
                match = Q(**{f"{alias}__contains": [cond.value]})
                if isinstance(cond.value, str):
                    match |= Q(**{f"{alias}__icontains": cond.value})
                queryset = queryset.filter(match)
            else:
                # jsonb orders values by type first (null < string < number < ...), so a
                # range is only meaningful between values of the same JSON type.
                json_type = "string" if isinstance(cond.value, str) else "number"
                queryset = queryset.alias(
                    **{f"{alias}_type": Func(expr, function="jsonb_typeof",
                                             output_field=CharField())}
                ).filter(**{f"{alias}_type": json_type, f"{alias}__{cond.op}": cond.value})
        return queryset


def task_id_value(value: Any, *, name: str = "taskId", operation: str = "") -> str | None:
    """``value`` as a task id (seed 004 ``TaskID``): ``None`` stays ``None``, else a string of
    1..255 characters matching ``IDENTIFIER_PATTERN`` (not blank, no NUL) without unpaired
    surrogates, as a layer identifier. Used by the write path (``MemoryInput.task_id``) and by
    the ``taskId`` filter.

    Raises:
        InvalidInput: not a string, blank, too long, or not storable (400 ``INVALID_INPUT``;
            ``details.field`` names ``name``).
    """
    if value is None:
        return None
    if (not isinstance(value, str) or len(value) > MAX_TASK_ID_LENGTH
            or not _TASK_ID_RE.fullmatch(value) or unstorable_text(value)):
        raise InvalidInput(
            f"{name} must be a non-blank string of at most {MAX_TASK_ID_LENGTH} characters, "
            "without NUL or unpaired surrogate characters.",
            operation=operation, details={"field": name, "maxLength": MAX_TASK_ID_LENGTH},
        )
    return value


def _time_bounds(spec: Any) -> tuple[tuple[str, datetime], ...]:
    """``{"gte": "2023-06-01", "lt": "2023-07-01T12:00:00+02:00"}`` as ``(op, moment)``
    pairs; ISO 8601 dates or date-times, a time without a zone read as UTC.

    Raises:
        InvalidInput: not an object, an operator other than :data:`RANGE_OPERATORS`, or a
            value that is not an ISO 8601 date or date-time (``details.field`` names it).
    """
    if spec is None:
        return ()
    if not isinstance(spec, dict) or not spec:
        raise InvalidInput('filter.occurredAt must be an object such as {"gte": "2023-06-01"}.',
                           details={"allowed": list(RANGE_OPERATORS)})
    bounds = []
    for op, raw in spec.items():
        if op not in RANGE_OPERATORS:
            raise InvalidInput(f"Unknown occurredAt operator {op!r}.",
                               details={"allowed": list(RANGE_OPERATORS)})
        try:
            moment = parse_datetime(raw) if isinstance(raw, str) else None
            if moment is not None and moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            if moment is not None:
                moment.astimezone(UTC)  # an offset that leaves the calendar raises here
        except (ValueError, OverflowError):
            moment = None
        if moment is None:
            raise InvalidInput(f"occurredAt.{op} must be an ISO 8601 date or date-time.",
                               details={"field": f"occurredAt.{op}"})
        bounds.append((op, moment))
    return tuple(bounds)


def _path(name: Any) -> tuple[str, ...]:
    if not isinstance(name, str) or not _FIELD_RE.match(name):
        raise InvalidInput(
            f"Invalid custom field name {name!r}: use letters, digits, '_', '-', dotted for "
            "nesting (at most 5 levels)."
        )
    return tuple(name.split("."))


def _condition(path: tuple[str, ...], op: str, value: Any) -> Condition:
    if op not in OPERATORS:
        raise InvalidInput(f"Unknown operator {op!r}.", details={"allowed": list(OPERATORS)})
    if op in ("gt", "gte", "lt", "lte") and (
        isinstance(value, bool) or not isinstance(value, (int, float, str))
    ):
        raise InvalidInput(f"Operator {op!r} needs a number or a string.")
    if op == "contains" and isinstance(value, (dict, list)):
        raise InvalidInput("Operator 'contains' needs a scalar value.")
    problem = unstorable_text(value)
    if problem:
        raise InvalidInput(f"Invalid filter value: {problem}")
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        raise InvalidInput("Filter values must be finite numbers (no NaN or Infinity).") from None
    return Condition(path, op, value)


def _nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    nested: Any = value
    for part in reversed(path):
        nested = {part: nested}
    return nested


def _scalar(raw: str) -> Any:
    """Query-string values: JSON scalars when they parse (3, 0.5, true), else the string."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(value, float) and not math.isfinite(value):
        return raw  # NaN, Infinity, 1e999: compared as the string that was sent
    return value if isinstance(value, (int, float, bool, str)) or value is None else raw


def _tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise InvalidInput("filter.tags must be a list of non-empty strings.")
    if any(unstorable_text(t) for t in value) or len(value) > 50:
        raise InvalidInput(
            "filter.tags: at most 50 tags, without NUL or unpaired surrogate characters."
        )
    return tuple(value)


def _source_type(value: Any) -> str | None:
    if value is None:
        return None
    if value not in SOURCE_TYPES:
        raise InvalidInput(
            f"Unknown sourceType {value!r}.", details={"allowed": list(SOURCE_TYPES)}
        )
    return str(value)


def _bool(value: Any, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise InvalidInput(f"{name} must be true or false.")


def _limit(conditions: list[Condition]) -> tuple[Condition, ...]:
    if len(conditions) > MAX_CONDITIONS:
        raise InvalidInput(f"At most {MAX_CONDITIONS} custom conditions.")
    return tuple(conditions)
