"""Vertex AI Vector Search (seed 001 "Vertex AI Vector Search Backend") with the official
``google-cloud-aiplatform`` client (``aiplatform_v1``, REST transport).

- Writes: streaming updates, ``IndexService.UpsertDatapoints`` in batches of at most 1,000
  datapoints (the API's limit per request); ``RemoveDatapoints`` to delete.
- Tenant isolation: every datapoint carries the restrict ``tenant_id: [<tenant>]`` and every
  query names it; datapoint ids are ``<tenant>:<id>``, so one tenant's read or delete can
  never reach another's datapoint even by id.
- Metadata: string and boolean values become restricts (token filters), numbers numeric
  restricts, so filters run inside the index; the full metadata and text travel in
  ``embedding_metadata`` and come back with ``return_full_datapoint``. A filter the index
  cannot express (any-of over numbers) is applied to a wider candidate list afterwards.
- Search: ``MatchService.FindNeighbors`` on the deployed index with ``neighbor_count``; the
  distance threshold (``min_score``) is applied to the returned ``distance``: for
  ``COSINE_DISTANCE`` and ``DOT_PRODUCT_DISTANCE`` indexes Vector Search returns the
  similarity there (larger is nearer), for ``SQUARED_L2_DISTANCE`` the squared distance.
- No listing of datapoints exists (``supports_scan`` is false): copy away from Vertex AI
  with the ids of the memories table.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import requests
from google.api_core import exceptions as google_errors
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials, Credentials
from google.cloud import aiplatform_v1 as vertex
from google.protobuf import json_format, struct_pb2

from memory_project.errors import MemoryServiceError
from vectors.adapters.common import POST_FILTER_FACTOR as POST_FILTER_FACTOR  # importable here too
from vectors.adapters.common import PostFilter, VendorBackend, adapter_capabilities, factory
from vectors.base import (
    Capabilities,
    DistanceMetric,
    Filter,
    MetadataValue,
    SearchHit,
    SearchQuery,
    VectorRecord,
)
from vectors.config import VertexAiSettings
from vectors.errors import (
    BackendRequestFailed,
    BackendUnavailable,
    RateLimited,
    translated_errors,
)

TENANT_NAMESPACE = "tenant_id"
MAX_BATCH = 1000
Restricts = tuple[list[vertex.IndexDatapoint.Restriction],
                  list[vertex.IndexDatapoint.NumericRestriction]]


def restricts(tenant_id: str, filter_: Filter | None) -> tuple[Restricts, Filter]:
    """The tenant restrict plus what of ``filter_`` the index can apply, and the rest of the
    filter (to apply afterwards)."""
    tokens = [vertex.IndexDatapoint.Restriction(namespace=TENANT_NAMESPACE,
                                                allow_list=[str(tenant_id)])]
    numeric: list[vertex.IndexDatapoint.NumericRestriction] = []
    rest: dict[str, Any] = {}
    for key, value in (filter_ or {}).items():
        values: list[Any] = list(value) if isinstance(value, list | tuple) else [value]
        if all(isinstance(v, str | bool) for v in values):
            tokens.append(vertex.IndexDatapoint.Restriction(
                namespace=key, allow_list=[_token(v) for v in values]))
        elif len(values) == 1:
            numeric.append(_numeric(key, values[0], equal=True))
        else:
            rest[key] = value
    return (tokens, numeric), rest


def _token(value: MetadataValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _numeric(key: str, value: MetadataValue, *, equal: bool = False
             ) -> vertex.IndexDatapoint.NumericRestriction:
    op = vertex.IndexDatapoint.NumericRestriction.Operator.EQUAL if equal else None
    if isinstance(value, int):
        return vertex.IndexDatapoint.NumericRestriction(namespace=key, value_int=value, op=op)
    return vertex.IndexDatapoint.NumericRestriction(namespace=key, value_double=float(value),
                                                   op=op)


class VertexAiBackend(VendorBackend[VertexAiSettings]):
    """The Vertex AI Vector Search adapter (see the module docstring)."""

    name = "vertex_ai"

    def __init__(self, settings: VertexAiSettings) -> None:
        super().__init__(settings)
        endpoint = settings.api_endpoint or f"{settings.location}-aiplatform.googleapis.com"
        credentials = _credentials(settings)
        self.index_name = _resource(settings, "indexes", settings.index)
        self.endpoint_name = _resource(settings, "indexEndpoints", settings.index_endpoint)
        self.indexes = vertex.IndexServiceClient(
            credentials=credentials, transport="rest",
            client_options=ClientOptions(api_endpoint=endpoint))
        self.endpoints = vertex.IndexEndpointServiceClient(
            credentials=credentials, transport="rest",
            client_options=ClientOptions(api_endpoint=endpoint))
        self.matches = vertex.MatchServiceClient(
            credentials=credentials, transport="rest",
            client_options=ClientOptions(
                api_endpoint=settings.public_endpoint_domain or endpoint))

    async def _probe(self) -> None:
        endpoint = await self._call(self.endpoints.get_index_endpoint,
                                    name=self.endpoint_name)
        deployed = {d.id for d in endpoint.deployed_indexes}
        if self.settings.deployed_index_id not in deployed:
            raise BackendRequestFailed(
                f"Index {self.settings.deployed_index_id} is not deployed to the endpoint.",
                details={"backend": self.name, "deployed": sorted(deployed)})

    async def capabilities(self) -> Capabilities:
        return adapter_capabilities(4096, self.batch_size, hybrid=False, scan=False)

    @property
    def batch_size(self) -> int:
        """Datapoints per ``UpsertDatapoints`` request (≤ 1,000)."""
        return max(1, min(self.settings.batch_size, MAX_BATCH))

    async def upsert(self, tenant_id: str, records: Sequence[VectorRecord]) -> int:
        for start in range(0, len(records), self.batch_size):
            datapoints = [self._datapoint(tenant_id, r)
                          for r in records[start:start + self.batch_size]]
            await self._call(self.indexes.upsert_datapoints, request=vertex.UpsertDatapointsRequest(
                index=self.index_name, datapoints=datapoints))
        return len(records)

    async def search(self, tenant_id: str, query: SearchQuery) -> list[SearchHit]:
        if query.hybrid:
            raise BackendRequestFailed("This adapter does not send sparse embeddings.",
                                       details={"backend": self.name})
        (tokens, numeric), rest = restricts(tenant_id, query.filter)
        after = PostFilter(rest, query.limit, query.min_score)
        request = vertex.FindNeighborsRequest(
            index_endpoint=self.endpoint_name, deployed_index_id=self.settings.deployed_index_id,
            return_full_datapoint=True,
            queries=[vertex.FindNeighborsRequest.Query(
                neighbor_count=after.candidates,
                datapoint=vertex.IndexDatapoint(
                    datapoint_id="query", feature_vector=[float(x) for x in query.vector],
                    restricts=tokens, numeric_restricts=numeric))])
        response = await self._call(self.matches.find_neighbors, request=request)
        hits: list[SearchHit] = []
        for group in response.nearest_neighbors:
            for neighbor in group.neighbors:
                record = self._record(tenant_id, neighbor.datapoint)
                if record is None:
                    continue
                score = float(neighbor.distance)
                if self.settings.metric == DistanceMetric.L2:
                    score = -score
                hits.append(SearchHit(id=record.id, score=score, metadata=record.metadata))
        return after.apply(hits)

    async def delete(self, tenant_id: str, ids: Sequence[str]) -> int:
        for start in range(0, len(ids), MAX_BATCH):
            await self._call(self.indexes.remove_datapoints, request=vertex.RemoveDatapointsRequest(
                index=self.index_name,
                datapoint_ids=[self._datapoint_id(tenant_id, i)
                               for i in ids[start:start + MAX_BATCH]]))
        return len(ids)

    async def get(self, tenant_id: str, ids: Sequence[str]) -> list[VectorRecord]:
        found: list[VectorRecord] = []
        for start in range(0, len(ids), MAX_BATCH):
            response = await self._call(
                self.matches.read_index_datapoints, request=vertex.ReadIndexDatapointsRequest(
                    index_endpoint=self.endpoint_name,
                    deployed_index_id=self.settings.deployed_index_id,
                    ids=[self._datapoint_id(tenant_id, i) for i in ids[start:start + MAX_BATCH]]))
            found.extend(r for r in (self._record(tenant_id, d) for d in response.datapoints)
                         if r is not None)
        return found

    # --- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _datapoint_id(tenant_id: str, record_id: str) -> str:
        return f"{tenant_id}:{record_id}"

    def _datapoint(self, tenant_id: str, record: VectorRecord) -> vertex.IndexDatapoint:
        vector = self.dense(record)
        tokens = [vertex.IndexDatapoint.Restriction(namespace=TENANT_NAMESPACE,
                                                    allow_list=[str(tenant_id)])]
        numeric = []
        for key, value in record.metadata.items():
            if isinstance(value, str | bool):
                tokens.append(vertex.IndexDatapoint.Restriction(namespace=key,
                                                                allow_list=[_token(value)]))
            else:
                numeric.append(_numeric(key, value))
        payload = struct_pb2.Struct()
        payload.update({"id": record.id, "metadata": dict(record.metadata), "text": record.text})
        return vertex.IndexDatapoint(
            datapoint_id=self._datapoint_id(tenant_id, record.id),
            feature_vector=vector, restricts=tokens,
            numeric_restricts=numeric, embedding_metadata=payload)

    def _record(self, tenant_id: str, datapoint: vertex.IndexDatapoint) -> VectorRecord | None:
        """The record of ``datapoint`` when it is ``tenant_id``'s, else ``None``."""
        prefix = f"{tenant_id}:"
        owners = [r for r in datapoint.restricts if r.namespace == TENANT_NAMESPACE]
        if not datapoint.datapoint_id.startswith(prefix) or not owners or list(
                owners[0].allow_list) != [str(tenant_id)]:
            return None
        payload = json_format.MessageToDict(datapoint._pb.embedding_metadata)
        metadata = {k: int(v) if isinstance(v, float) and v.is_integer() and not isinstance(
            v, bool) else v for k, v in payload.get("metadata", {}).items()}
        return VectorRecord(id=datapoint.datapoint_id[len(prefix):],
                            vector=tuple(datapoint.feature_vector), metadata=metadata,
                            text=str(payload.get("text", "")))

    async def _call(self, method: Any, **kwargs: Any) -> Any:
        """Run a client method off the event loop, errors mapped."""
        async with translated_errors(self.name, _translate):
            return await asyncio.to_thread(method, retry=None,
                                           timeout=self.settings.timeout_seconds, **kwargs)


def _translate(exc: Exception, details: dict[str, Any]) -> MemoryServiceError | None:
    """The client's exceptions as the service's backend errors."""
    if isinstance(exc, google_errors.TooManyRequests):
        return RateLimited("Vertex AI is rate limiting.", details=details)
    if isinstance(exc, google_errors.ServerError | google_errors.DeadlineExceeded
                  | requests.exceptions.RequestException):
        return BackendUnavailable("Vertex AI cannot be reached or failed.", details=details)
    if isinstance(exc, google_errors.GoogleAPICallError):
        return BackendRequestFailed("Vertex AI refused the request.", details=details)
    return None


def _resource(settings: VertexAiSettings, kind: str, value: str) -> str:
    """A full resource name from a name or a bare id."""
    if value.startswith("projects/"):
        return value
    return f"projects/{settings.project}/locations/{settings.location}/{kind}/{value}"


def _credentials(settings: VertexAiSettings) -> Credentials | None:
    if settings.credentials_file == "anonymous":  # a local emulator: no Google sign-in
        return AnonymousCredentials()
    if settings.credentials_file:
        from google.oauth2 import service_account

        return service_account.Credentials.from_service_account_file(  # type: ignore[no-any-return]
            settings.credentials_file,
            scopes=["https://www.googleapis.com/auth/cloud-platform"])
    return None  # Application Default Credentials


#: The registry's factory.
build = factory(VertexAiBackend, VertexAiSettings)
