"""The service's operations, written once for the sync and the async client.

Every method builds one request and hands it to ``_send``; :class:`~memory_client.MemoryClient`
returns the decoded JSON (or the text of a text answer: a Markdown context),
:class:`~memory_client.AsyncMemoryClient` an awaitable of it.
Paths and shapes are those of the service's OpenAPI document (``/api/schema/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar
from urllib.parse import quote

R = TypeVar("R")
Json = dict[str, Any]


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _agent(name: str) -> str:
    return quote(name, safe="")


class Endpoints(Generic[R]):
    """The operations; ``R`` is what a call returns (JSON, or an awaitable of it)."""

    def _send(self, method: str, path: str, *, params: dict[str, Any] | None = None,
              json: Any = None) -> R:
        raise NotImplementedError

    # -- memories (seed 001) -------------------------------------------------------------
    def add(self, content: str, *, layer: str, identifiers: dict[str, str] | None = None,
            metadata: dict[str, Any] | None = None, **fields: Any) -> R:
        """``POST /api/v1/memories``: ``{"memory": {...}, "embeddingGenerated": bool}``."""
        return self._send("POST", "/api/v1/memories", json=_clean({
            "content": content, "layer": layer, "identifiers": identifiers or {},
            "metadata": metadata, **fields}))

    def get(self, memory_id: str) -> R:
        """``GET /api/v1/memories/{id}``: ``{"memory": {...}}``;
        :class:`~memory_client.errors.NotFound` if absent."""
        return self._send("GET", f"/api/v1/memories/{quote(memory_id, safe='')}")

    def update(self, memory_id: str, *, content: str | None = None,
               metadata: dict[str, Any] | None = None, **fields: Any) -> R:
        """``PATCH /api/v1/memories/{id}``: ``{"memory": {...}, "embeddingRegenerated"}``."""
        return self._send("PATCH", f"/api/v1/memories/{quote(memory_id, safe='')}",
                          json=_clean({"content": content, "metadata": metadata, **fields}))

    def delete(self, memory_id: str, *, hard: bool = False) -> R:
        """``DELETE /api/v1/memories/{id}`` (soft unless ``hard``)."""
        return self._send("DELETE", f"/api/v1/memories/{quote(memory_id, safe='')}",
                          params={"hard": "true"} if hard else None)

    def list(self, *, layer: str, identifiers: dict[str, str] | None = None,
             limit: int | None = None, cursor: str | None = None) -> R:
        """``GET /api/v1/memories``: one page, newest first."""
        return self._send("GET", "/api/v1/memories", params=_clean({
            "layer": layer, "limit": limit, "cursor": cursor, **(identifiers or {})}))

    def search(self, query: str, *, identifiers: dict[str, str] | None = None,
               layers: Sequence[str] | None = None, limit: int | None = None,
               threshold: float | None = None, mode: str | None = None,
               **fields: Any) -> R:
        """``POST /api/v1/memories/search``: ``{"results": [{"memory", "score", ...}]}``."""
        return self._send("POST", "/api/v1/memories/search", json=_clean({
            "query": query, "identifiers": identifiers or {},
            "layers": None if layers is None else [*layers],
            "limit": limit, "threshold": threshold, "mode": mode, **fields}))

    def recall(self, query: str, *, identifiers: dict[str, str] | None = None,
               limit: int | None = None, **fields: Any) -> R:
        """``POST /api/v1/memories/recall`` (seed 002's composite score)."""
        return self._send("POST", "/api/v1/memories/recall", json=_clean({
            "query": query, "identifiers": identifiers or {}, "limit": limit, **fields}))

    def ingest_conversation(self, messages: Sequence[dict[str, Any]], *, layer: str = "user",
                            identifiers: dict[str, str] | None = None,
                            reference_time: str | None = None) -> R:
        """``POST /api/v1/conversations``: ``{"jobId", "status": "queued", "messages": n}``;
        each message is ``{"role", "content", "name"?, "createdAt"?, "id"?}``."""
        return self._send("POST", "/api/v1/conversations", json=_clean({
            "messages": [*messages], "layer": layer, "identifiers": identifiers or {},
            "referenceTime": reference_time}))

    # -- summaries and context -----------------------------------------------------------
    def summaries(self, *, identifiers: dict[str, str] | None = None,
                  depth: str | None = None) -> R:
        """``GET /api/v1/summaries``: ``{"summaries": [...], "totalTokens": n}``, the summary
        of every layer the identifiers reach, in precedence order (agent first); ``depth``:
        ``sentence``, ``paragraph`` or ``detailed`` (default: each layer's deepest)."""
        return self._send("GET", "/api/v1/summaries",
                          params=_clean({**(identifiers or {}), "depth": depth}))

    def context(self, query: str | None = None, *, identifiers: dict[str, str] | None = None,
                budget: int | None = None, depth: str | None = None,
                summary_share: float | None = None, markdown: bool = False) -> R:
        """``POST /api/v1/context``: what an agent reads before it acts, the layers' summaries
        and the memories most relevant to ``query`` within ``budget`` tokens (50..32,000,
        default 2000). JSON (``{"summaries", "memories", "tokenCount", ...}``), or with
        ``markdown`` the Markdown text, ready for a prompt (``str``)."""
        return self._send("POST", "/api/v1/context", json=_clean({
            "identifiers": identifiers or {}, "query": query, "budget": budget,
            "depth": depth, "summaryShare": summary_share,
            "format": "markdown" if markdown else None}))

    # -- agent memories (seed 003) -------------------------------------------------------
    def agent_memories(self, agent: str, *, project_id: str, user_id: str | None = None) -> R:
        """``GET /api/agents/{agent}/memories``: ``{"memories": [...]}``, the 50 most recent."""
        return self._send("GET", f"/api/agents/{_agent(agent)}/memories",
                          params=_clean({"projectId": project_id, "userId": user_id}))

    def agent_memory_add(self, agent: str, *, project_id: str, content: str,
                         source: str = "manual", user_id: str | None = None) -> R:
        """``POST /api/agents/{agent}/memories``: the stored item."""
        return self._send("POST", f"/api/agents/{_agent(agent)}/memories", json=_clean({
            "projectId": project_id, "content": content, "source": source,
            "userId": user_id}))

    def agent_memory_delete(self, agent: str, memory_id: str) -> R:
        """``DELETE /api/agents/{agent}/memories/{id}``."""
        return self._send(
            "DELETE", f"/api/agents/{_agent(agent)}/memories/{quote(memory_id, safe='')}")

    def agent_memories_clear(self, agent: str, *, project_id: str,
                             user_id: str | None = None) -> R:
        """``DELETE /api/agents/{agent}/memories?projectId=…``: every one of them."""
        return self._send("DELETE", f"/api/agents/{_agent(agent)}/memories",
                          params=_clean({"projectId": project_id, "userId": user_id}))

    def agent_extract(self, agent: str, *, project_id: str, transcript: str,
                      user_id: str | None = None) -> R:
        """``POST /api/agents/{agent}/extract``: ``{"jobId", "status": "queued"}``."""
        return self._send("POST", f"/api/agents/{_agent(agent)}/extract", json=_clean({
            "projectId": project_id, "transcript": transcript, "userId": user_id}))
