"""The one door to the graph's SQL (seed 001 "Tenant Query Isolation", "Multi-tenant Graph
Isolation"): every statement on a graph table goes through :func:`tenant_execute`, which
refuses it unless

- the tenant is a valid UUID and is passed as the named parameter ``$tenant_id`` (a value,
  never text spliced into the statement);
- the statement holds no string literal and no second statement (no quote, no ``;``), so
  nothing can be interpolated into it;
- every graph table it names (in ``FROM``, ``JOIN``, ``INTO``, ``UPDATE``) is filtered on
  that parameter: ``<alias>.tenant_id = $tenant_id`` for an aliased table,
  ``tenant_id = $tenant_id`` otherwise.

A refused statement raises :class:`GraphQueryRefused` and is written to the security audit
log with the statement and the reason (``graph_query_refused``) when a tenant scope is active.
This is the second lock: the first is that a reader's in-memory database holds only its own
tenant's rows, loaded from the tenant's own snapshot prefix.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from memory_project.errors import MemoryServiceError
from tenants.audit import audit_record
from tenants.context import current_context

logger = logging.getLogger(__name__)

#: Tables that hold tenant rows (``node_index`` and ``adjacency``: the readers' traversal
#: tables, ``graph.store``).
GRAPH_TABLES = frozenset({"memory_nodes", "entities", "memory_edges", "entity_edges",
                          "node_index", "adjacency"})
_REFERENCE = re.compile(
    r"\b(?:from|join|into|update)\s+([a-z_][a-z0-9_]*)(?:\s+(?:as\s+)?(?!where\b|on\b|join\b|"
    r"set\b|using\b|left\b|inner\b|cross\b|order\b|group\b|limit\b|values\b|union\b|"
    r"select\b)([a-z_][a-z0-9_]*))?", re.IGNORECASE)


class GraphQueryRefused(MemoryServiceError):
    """A graph statement without its tenant filter (``GRAPH_QUERY_REFUSED``, HTTP 500: no
    client input reaches SQL, so this is a defect caught before it could leak)."""

    code = "GRAPH_QUERY_REFUSED"
    status = 500
    default_message = "A graph query without its tenant filter was refused."


def check_statement(sql: str, params: dict[str, Any]) -> str | None:
    """Why ``sql`` with ``params`` may not run, or ``None`` when it may (see module doc)."""
    tenant = params.get("tenant_id")
    try:
        uuid.UUID(str(tenant))
    except ValueError:
        return "no valid tenant_id parameter"
    if "'" in sql or '"' in sql or ";" in sql or "--" in sql or "/*" in sql:
        return "literal, comment or second statement in the text"
    for match in _REFERENCE.finditer(sql):
        table, alias = match.group(1).lower(), (match.group(2) or "").lower()
        if table not in GRAPH_TABLES:
            continue
        if match.group(0).lower().startswith("into"):
            rest = sql[match.end():]
            if not re.match(r"\s*(values\s*\(\s*\$tenant_id\b|select\b.*\bwhere\s+tenant_id"
                            r"\s*=\s*\$tenant_id\b)", rest, re.IGNORECASE | re.DOTALL):
                return f"insert into {table} does not start with $tenant_id"
            continue
        column = rf"\b{re.escape(alias)}\.tenant_id" if alias else r"(?<![.\w])tenant_id"
        if not re.search(column + r"\s*=\s*\$tenant_id\b", sql, re.IGNORECASE):
            return f"{table} is not filtered on $tenant_id"
    return None


def tenant_execute(conn: Any, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Run ``sql`` on the DuckDB connection (or cursor) ``conn`` after :func:`check_statement`.

    Args:
        params: named parameters; ``tenant_id`` is required (a UUID or its text).

    Returns:
        Every row of the result (fetched in full, so the connection is free for the next
        statement).

    Raises:
        GraphQueryRefused: the statement failed the check; logged and audited.
    """
    return list(conn.execute(sql, _checked(sql, params)).fetchall())


def tenant_columns(conn: Any, sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """:func:`tenant_execute` returning the result as columns (numpy arrays by column name):
    thousands of rows without a Python object per value."""
    return dict(conn.execute(sql, _checked(sql, params)).fetchnumpy())


def tenant_relation(conn: Any, sql: str, params: dict[str, Any]) -> Any:
    """:func:`tenant_execute` for a ``SELECT`` whose result is written out (a DuckDB
    relation: ``.write_parquet(path)``), under the same check."""
    return conn.sql(sql, params=_checked(sql, params))


def _checked(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters ``sql`` names, bound, once :func:`check_statement` passes it."""
    reason = check_statement(sql, params)
    if reason is not None:
        _refused(sql, params, reason)
    bound = {**params, "tenant_id": str(params["tenant_id"])}
    return {k: v for k, v in bound.items() if f"${k}" in sql}


def _refused(sql: str, params: dict[str, Any], reason: str) -> None:
    logger.error("graph query refused (%s): %s", reason, " ".join(sql.split())[:500])
    ctx = current_context()
    if ctx is not None:
        audit_record(ctx, action="graph_query_refused", target_type="graph",
                     details={"reason": reason, "statement": " ".join(sql.split())[:2000],
                              "parameters": sorted(params)})
    raise GraphQueryRefused(details={"reason": reason})
