"""Databricks Mosaic AI Vector Search (seed 001 "Databricks Vector Search Backend") with the
official ``databricks-sdk`` (PAT or OAuth machine-to-machine sign-in).

- Tenant isolation: Unity Catalog namespace per tenant, schema
  ``<catalog>.<schema_prefix><tenant>`` (created on first write, read access granted to
  ``grant_principal`` when set), holding the Delta table ``<table>`` (Change Data Feed on)
  and its Delta Sync index ``<table>_index`` on the vector search ``endpoint``.
- Writes go to the Delta table through the SQL Statement Execution API (one ``MERGE`` or
  ``DELETE`` per batch of 200 records, the batch passed as one JSON parameter, never spliced
  into SQL); the index follows the table through Change Data Feed: a ``TRIGGERED`` pipeline
  is asked to sync after each write.
- Search: the endpoint's query API with ``filters_json`` on the filterable columns
  (``filter_columns``: the memory system's keys), ``num_results`` and ``score_threshold``;
  ``query_type`` ``HYBRID`` with the query text fuses keyword and vector search (Databricks
  fuses by reciprocal rank). Filters on other metadata keys are applied to a wider result
  list afterwards. Reads by id come from the Delta table (the index's source of truth).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import requests
from databricks.sdk import WorkspaceClient
from databricks.sdk import errors as dbx_errors
from databricks.sdk.config import Config
from databricks.sdk.service import sql, vectorsearch

from memory_project.errors import MemoryServiceError
from vectors.adapters.common import POST_FILTER_FACTOR as POST_FILTER_FACTOR  # importable here too
from vectors.adapters.common import PostFilter, VendorBackend, adapter_capabilities, causes, factory
from vectors.base import Capabilities, DistanceMetric, Filter, SearchHit, SearchQuery, VectorRecord
from vectors.config import DatabricksSettings
from vectors.errors import (
    BackendRequestFailed,
    BackendUnavailable,
    RateLimited,
    translated_errors,
)

BATCH = 200
#: Metadata keys with a column of their own in every tenant's table (filtered by the index).
FILTER_COLUMNS = ("layer", "kind", "scope", "scope_key", "session_id", "task_id")
_NAME = re.compile(r"^[A-Za-z0-9_]{1,255}$")


def quoted(*parts: str) -> str:
    """A backquoted Unity Catalog name; parts are letters, digits and underscores."""
    for part in parts:
        if not _NAME.match(part):
            raise BackendRequestFailed(f"{part!r} is not a valid Unity Catalog name.",
                                       details={"backend": "databricks"})
    return ".".join(f"`{p}`" for p in parts)


class DatabricksBackend(VendorBackend[DatabricksSettings]):
    """The Databricks Vector Search adapter (see the module docstring)."""

    name = "databricks"

    def __init__(self, settings: DatabricksSettings) -> None:
        super().__init__(settings)
        auth: dict[str, Any] = ({"token": settings.token} if settings.token else
                                {"client_id": settings.client_id,
                                 "client_secret": settings.client_secret})
        config = Config(host=settings.host, **auth, product="memory-service",
                        http_timeout_seconds=int(settings.timeout_seconds),
                        retry_timeout_seconds=int(settings.timeout_seconds))
        self.client = WorkspaceClient(config=config)
        self._ready: set[str] = set()

    # --- names -----------------------------------------------------------------------------

    def schema(self, tenant_id: str) -> tuple[str, str]:
        """``(catalog, schema)`` of the tenant's Unity Catalog namespace."""
        tenant = str(tenant_id).replace("-", "_")
        return self.settings.catalog, f"{self.settings.schema_prefix}{tenant}"

    def table(self, tenant_id: str) -> str:
        """The tenant's Delta table, quoted."""
        return quoted(*self.schema(tenant_id), self.settings.table)

    def index(self, tenant_id: str) -> str:
        """The tenant's vector index name (``catalog.schema.<table>_index``)."""
        catalog, schema = self.schema(tenant_id)
        return f"{catalog}.{schema}.{self.settings.table}_index"

    # --- the trait -------------------------------------------------------------------------

    async def _probe(self) -> None:
        endpoint = await self._call(self.client.vector_search_endpoints.get_endpoint,
                                    self.settings.endpoint)
        state = endpoint.endpoint_status.state if endpoint.endpoint_status else None
        if state != vectorsearch.EndpointStatusState.ONLINE:
            raise BackendUnavailable(f"Endpoint {self.settings.endpoint} is {state}.",
                                     details={"backend": self.name})

    async def capabilities(self) -> Capabilities:
        return adapter_capabilities(
            4096, BATCH, hybrid=True,
            metrics=(DistanceMetric.L2,) if self.settings.metric == DistanceMetric.L2
            else (DistanceMetric.COSINE, DistanceMetric.L2))

    async def upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        await self._ensure(tenant_id)
        struct = ", ".join(
            ["id: STRING", "embedding: ARRAY<FLOAT>", "text: STRING", "metadata: STRING",
             *(f"{c}: STRING" for c in FILTER_COLUMNS)])
        for start in range(0, len(records), BATCH):
            rows = [self._row(r) for r in records[start:start + BATCH]]
            await self._sql(
                f"MERGE INTO {self.table(tenant_id)} AS t "
                f"USING (SELECT * FROM inline(from_json(:rows, 'ARRAY<STRUCT<{struct}>>'))) AS s "
                "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
                rows=json.dumps(rows))
        await self._sync(tenant_id)
        return len(records)

    async def search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        pushed, rest = self._split(query.filter)
        after = PostFilter(rest, query.limit)  # min_score: the backend's score_threshold
        kwargs: dict[str, Any] = {
            "columns": ["id", "metadata"],
            "query_vector": [float(x) for x in query.vector],
            "num_results": after.candidates,
            "filters_json": json.dumps(pushed) if pushed else None,
        }
        if query.hybrid and query.text:
            kwargs.update(query_type="HYBRID", query_text=query.text)
        elif query.min_score is not None:
            kwargs["score_threshold"] = query.min_score
        try:
            response = await self._call(self.client.vector_search_indexes.query_index,
                                        self.index(tenant_id), **kwargs)
        except BackendRequestFailed as exc:
            if exc.details.get("status") == 404:  # the tenant never wrote: no index yet
                return []
            raise
        columns = [c.name for c in response.manifest.columns]
        hits = []
        for row in (response.result.data_array or []) if response.result else []:
            values = dict(zip(columns, row, strict=False))
            hits.append(SearchHit(id=str(values["id"]), score=float(row[-1]),
                                  metadata=json.loads(values.get("metadata") or "{}")))
        return after.apply(hits)

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> int:
        if not await self._has_index(tenant_id):
            return 0
        for start in range(0, len(ids), BATCH):
            await self._sql(
                f"DELETE FROM {self.table(tenant_id)} "
                "WHERE array_contains(from_json(:ids, 'ARRAY<STRING>'), id)",
                ids=json.dumps(list(ids[start:start + BATCH])))
        await self._sync(tenant_id)
        return len(ids)

    async def get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        if not await self._has_index(tenant_id):
            return []
        found: list[VectorRecord] = []
        for start in range(0, len(ids), BATCH):
            rows = await self._sql(
                f"SELECT id, to_json(embedding), text, metadata FROM {self.table(tenant_id)} "
                "WHERE array_contains(from_json(:ids, 'ARRAY<STRING>'), id)",
                ids=json.dumps(list(ids[start:start + BATCH])))
            found.extend(VectorRecord(id=r[0], vector=tuple(json.loads(r[1])), text=r[2] or "",
                                      metadata=json.loads(r[3] or "{}")) for r in rows)
        return found

    async def scan(self, tenant_id: str, *, cursor: str | None = None, limit: int = 500
                   ) -> tuple[list[str], str | None]:
        if not await self._has_index(tenant_id):
            return [], None
        response = await self._call(self.client.vector_search_indexes.scan_index,
                                    self.index(tenant_id), last_primary_key=cursor,
                                    num_results=limit)
        ids = []
        for item in response.data or []:
            fields = {f.key: f.value for f in item.fields or []}
            ids.append(str(fields["id"].string_value))
        return ids, (response.last_primary_key if len(ids) == limit else None)

    # --- helpers ---------------------------------------------------------------------------

    def _split(self, filter_: Filter | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Filter terms on filterable columns (Databricks ``filters_json``) and the rest."""
        pushed: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for key, value in (filter_ or {}).items():
            target = pushed if key in FILTER_COLUMNS else rest
            target[key] = list(value) if isinstance(value, list | tuple) else value
        return pushed, rest

    def _row(self, record: VectorRecord) -> dict[str, Any]:
        row: dict[str, Any] = {"id": record.id, "embedding": self.dense(record),
                               "text": record.text, "metadata": json.dumps(dict(record.metadata))}
        for column in FILTER_COLUMNS:
            value = record.metadata.get(column)
            row[column] = None if value is None else str(value)
        return row

    async def _has_index(self, tenant_id: str) -> bool:
        name = self.index(tenant_id)
        if name in self._ready:
            return True
        try:
            await self._call(self.client.vector_search_indexes.get_index, name)
        except BackendRequestFailed as exc:
            if exc.details.get("status") == 404:
                return False
            raise
        self._ready.add(name)
        return True

    async def _ensure(self, tenant_id: str) -> None:
        """Create the tenant's schema, Delta table (CDF on) and Delta Sync index."""
        if await self._has_index(tenant_id):
            return
        catalog, schema = self.schema(tenant_id)
        await self._sql(f"CREATE SCHEMA IF NOT EXISTS {quoted(catalog, schema)}")
        columns = ", ".join(["id STRING NOT NULL", "embedding ARRAY<FLOAT>", "text STRING",
                             "metadata STRING", *(f"{c} STRING" for c in FILTER_COLUMNS)])
        await self._sql(f"CREATE TABLE IF NOT EXISTS {self.table(tenant_id)} ({columns}) "
                        "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
        if self.settings.grant_principal:
            principal = self.settings.grant_principal.replace("`", "")
            await self._sql(f"GRANT USE SCHEMA, SELECT ON SCHEMA {quoted(catalog, schema)} "
                            f"TO `{principal}`")
        await self._call(
            self.client.vector_search_indexes.create_index, name=self.index(tenant_id),
            endpoint_name=self.settings.endpoint, primary_key="id",
            index_type=vectorsearch.VectorIndexType.DELTA_SYNC,
            delta_sync_index_spec=vectorsearch.DeltaSyncVectorIndexSpecRequest(
                source_table=f"{catalog}.{schema}.{self.settings.table}",
                pipeline_type=vectorsearch.PipelineType.TRIGGERED,
                columns_to_sync=["id", "text", "metadata", *FILTER_COLUMNS],
                embedding_vector_columns=[vectorsearch.EmbeddingVectorColumn(
                    name="embedding", embedding_dimension=self.settings.dimensions)]))
        self._ready.add(self.index(tenant_id))

    async def _sync(self, tenant_id: str) -> None:
        """Ask the TRIGGERED Delta Sync pipeline to pick up the table's changes."""
        await self._call(self.client.vector_search_indexes.sync_index, self.index(tenant_id))

    async def _sql(self, statement: str, **parameters: str) -> list[list[Any]]:
        """Run ``statement`` on the SQL warehouse; its rows (waits up to the timeout)."""
        response = await self._call(
            self.client.statement_execution.execute_statement, statement=statement,
            warehouse_id=self.settings.warehouse_id, wait_timeout="30s",
            on_wait_timeout=sql.ExecuteStatementRequestOnWaitTimeout.CONTINUE,
            parameters=[sql.StatementParameterListItem(name=k, value=v)
                        for k, v in parameters.items()] or None)
        deadline = time.monotonic() + self.settings.timeout_seconds
        while response.status.state in (sql.StatementState.PENDING, sql.StatementState.RUNNING):
            if time.monotonic() > deadline:
                raise BackendUnavailable("The SQL warehouse did not finish in time.",
                                         details={"backend": self.name})
            await asyncio.sleep(0.2)
            response = await self._call(self.client.statement_execution.get_statement,
                                        response.statement_id)
        if response.status.state != sql.StatementState.SUCCEEDED:
            error = response.status.error
            raise BackendRequestFailed(
                "A SQL statement failed on the warehouse.",
                details={"backend": self.name, "state": str(response.status.state),
                         "error": (error.message if error else "")[:300]})
        return (response.result.data_array or []) if response.result else []

    async def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """A client method in a worker thread, errors mapped there (asyncio would replace
        a ``TimeoutError`` crossing the thread boundary by a new one, losing its cause)."""
        return await asyncio.to_thread(self._mapped, method, *args, **kwargs)

    def _mapped(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """``method(*args, **kwargs)`` with errors mapped. The SDK retries 429 and 503 itself
        until ``timeout_seconds``; rate limits still there then are ``RATE_LIMITED``."""
        with translated_errors(self.name, _translate):
            return method(*args, **kwargs)


def _translate(exc: Exception, details: dict[str, Any]) -> MemoryServiceError | None:
    """The SDK's exceptions as the service's backend errors."""
    if isinstance(exc, TimeoutError):
        if any(isinstance(cause, dbx_errors.TooManyRequests) for cause in causes(exc)):
            return RateLimited("Databricks is rate limiting.", details=details)
        return BackendUnavailable("Databricks did not answer in time.", details=details)
    if isinstance(exc, dbx_errors.TooManyRequests):
        return RateLimited("Databricks is rate limiting.", details=details)
    if isinstance(exc, dbx_errors.NotFound | dbx_errors.ResourceDoesNotExist):
        return BackendRequestFailed("Databricks: not found.", details={**details, "status": 404})
    if isinstance(exc, dbx_errors.InternalError | dbx_errors.TemporarilyUnavailable
                  | dbx_errors.DeadlineExceeded | requests.exceptions.RequestException):
        return BackendUnavailable("Databricks cannot be reached or failed.", details=details)
    if isinstance(exc, dbx_errors.DatabricksError):
        return BackendRequestFailed("Databricks refused the request.", details=details)
    return None


#: The registry's factory.
build = factory(DatabricksBackend, DatabricksSettings)
