"""``memory-mcp``: the memory service as a Model Context Protocol server (official ``mcp`` SDK).

Tools: add, search, recall, get, update, delete and list memories, the context to read before
acting and the layers' summaries, conversation ingestion, and seed 003's agent memories
(list, add, post-run extraction); resources: a memory (``memory://memories/{id}``)
and an agent's memories of a project (``memory://agents/{agent}/projects/{project}``). Each
call goes to the service's REST API (``--url``/``MEMORY_SERVICE_URL``) with the caller's API
key, so the service's own tenant isolation, roles, policies and rate limits apply unchanged;
an error comes back as a tool error naming the service's code.

Transports: ``stdio`` (the default; the key is ``MEMORY_API_KEY``) and streamable HTTP
(``--transport http``, served at ``/mcp``); over HTTP every request carries its own key in
``Authorization: Bearer <key>`` (or ``X-API-Key``), and a request without one is refused: the
server's environment key is never lent to an HTTP caller.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import BaseModel, Field

from memory_client.client import AsyncMemoryClient
from memory_client.errors import MemoryServiceError

DEFAULT_URL = "http://127.0.0.1:8000"
LayerName = Literal["agent", "user", "session", "project", "team", "org", "company"]
Identifiers = Annotated[dict[str, str] | None, Field(
    description="Layer identifiers: agentId, userId, sessionId, projectId, teamId, orgId "
                "(the layer decides which are required, e.g. user → userId).")]
MemoryId = Annotated[str, Field(description="A memory id (UUID) from add, search or list.")]

server = MCPServer(
    "memory-service",
    instructions="Long-term memory across seven layers of scope (agent, user, session, "
                 "project, team, org, company). Read memory_context before a task, search or "
                 "recall before answering; add what is worth remembering; agent memories keep "
                 "what an agent learned per project.",
)
_settings: dict[str, str] = {"url": os.environ.get("MEMORY_SERVICE_URL", DEFAULT_URL),
                             "api_key": os.environ.get("MEMORY_API_KEY", "")}


def api_key(headers: Any) -> str:
    """The caller's API key: from the HTTP request's headers, or (stdio: no headers) from
    ``MEMORY_API_KEY``.

    Raises:
        ToolError: no key.
    """
    if headers is not None:
        auth = str(headers.get("authorization") or "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else str(
            headers.get("x-api-key") or "")
    else:
        key = _settings["api_key"]
    if not key:
        raise ToolError("UNAUTHORIZED: no API key (send Authorization: Bearer <key>; "
                        "over stdio set MEMORY_API_KEY)")
    return key


async def _call(ctx: Context | None, method: str, *args: Any, **kwargs: Any) -> Any:
    headers = ctx.headers if ctx is not None else None
    try:
        async with AsyncMemoryClient(_settings["url"], api_key(headers), max_retries=2) as client:
            return await getattr(client, method)(*args, **kwargs)
    except MemoryServiceError as err:
        details = f" {json.dumps(err.details)}" if err.details else ""
        raise ToolError(f"{err.code or err.status}: {err.message}{details}") from None


@server.tool()
async def memory_add(
    content: Annotated[str, Field(description="What to remember, one fact or event.")],
    layer: Annotated[LayerName, Field(description="Whose memory it is.")],
    identifiers: Identifiers = None,
    tags: Annotated[list[str] | None, Field(description="Tags for filtering.")] = None,
    occurred_at: Annotated[str | None, Field(description=(
        "When it was said or happened, if not now (ISO 8601 date or date-time); searches "
        "that name a date match it."))] = None,
    ctx: Context | None = None,
) -> dict[str, Any]:
    """Store a memory. Returns {"memory": {...}, "embeddingGenerated": bool}."""
    metadata = {"tags": tags} if tags else None
    fields = {"occurredAt": occurred_at} if occurred_at else {}
    return dict(await _call(ctx, "add", content, layer=layer, identifiers=identifiers,
                            metadata=metadata, **fields))


Tags = Annotated[list[str] | None, Field(description="Only memories with any of these tags.")]
Since = Annotated[str | None, Field(description=(
    "Only memories that happened at or after this (ISO 8601 date or date-time; a memory's "
    "occurredAt, else when it was stored)."))]
Before = Annotated[str | None, Field(description=(
    "Only memories that happened before this (ISO 8601 date or date-time)."))]


def _filter(tags: list[str] | None, since: str | None, before: str | None
            ) -> dict[str, Any] | None:
    """The service's ``filter`` object (``MetadataFilter``) for the tools' filter arguments."""
    found: dict[str, Any] = {"tags": tags} if tags else {}
    bounds = {op: value for op, value in (("gte", since), ("lt", before)) if value}
    if bounds:
        found["occurredAt"] = bounds
    return found or None


@server.tool()
async def memory_search(
    query: Annotated[str, Field(description="What to look for, in words.")],
    identifiers: Identifiers = None,
    layers: Annotated[list[LayerName] | None, Field(
        description="Layers to search; default: every layer the identifiers reach.")] = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Results at most.")] = 10,
    mode: Annotated[Literal["hybrid", "semantic", "keyword"], Field(
        description="hybrid ranks what meaning and keywords find together.")] = "hybrid",
    tags: Tags = None,
    since: Since = None,
    before: Before = None,
    ctx: Context | None = None,
) -> dict[str, Any]:
    """Search memories by meaning and keyword. Returns {"results": [{"memory", "score"}]}."""
    fields = {"filter": f} if (f := _filter(tags, since, before)) else {}
    return dict(await _call(ctx, "search", query, identifiers=identifiers, layers=layers,
                            limit=limit, mode=mode, **fields))


@server.tool()
async def memory_recall(
    query: Annotated[str, Field(description="The situation or question to recall for.")],
    identifiers: Identifiers = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 10,
    tags: Tags = None,
    since: Since = None,
    before: Before = None,
    ctx: Context | None = None,
) -> dict[str, Any]:
    """Recall the memories that matter most now: relevance, importance, recency and
    confidence combined. Returns {"results": [...]}."""
    fields = {"filter": f} if (f := _filter(tags, since, before)) else {}
    return dict(await _call(ctx, "recall", query, identifiers=identifiers, limit=limit,
                            **fields))


@server.tool()
async def memory_get(memory_id: MemoryId, ctx: Context | None = None) -> dict[str, Any]:
    """One memory by id. Returns {"memory": {...}}."""
    return dict(await _call(ctx, "get", memory_id))


@server.tool()
async def memory_update(
    memory_id: MemoryId,
    content: Annotated[str | None, Field(description="The new content.")] = None,
    tags: Annotated[list[str] | None, Field(description="Replace the tags.")] = None,
    occurred_at: Annotated[str | None, Field(description=(
        "When it was said or happened (ISO 8601 date or date-time)."))] = None,
    ctx: Context | None = None,
) -> dict[str, Any]:
    """Change a memory's content, tags or time; the old version stays in its history."""
    metadata = {"tags": tags} if tags is not None else None
    fields = {"occurredAt": occurred_at} if occurred_at else {}
    return dict(await _call(ctx, "update", memory_id, content=content, metadata=metadata,
                            **fields))


@server.tool()
async def memory_delete(memory_id: MemoryId, ctx: Context | None = None) -> dict[str, Any]:
    """Delete a memory (restorable until the tenant's retention purges it)."""
    return dict(await _call(ctx, "delete", memory_id))


@server.tool()
async def memory_list(
    layer: Annotated[LayerName, Field(description="The layer to list.")],
    identifiers: Identifiers = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Field(description="nextCursor of the previous page.")] = None,
    ctx: Context | None = None,
) -> dict[str, Any]:
    """A layer's memories, newest first, one page at a time."""
    return dict(await _call(ctx, "list", layer=layer, identifiers=identifiers, limit=limit,
                            cursor=cursor))


Depth = Literal["sentence", "paragraph", "detailed"]
#: What :func:`memory_context` answers when nothing fits or nothing is stored.
EMPTY_CONTEXT = "Nothing is stored for these identifiers yet."


@server.tool()
async def memory_context(
    identifiers: Identifiers = None,
    query: Annotated[str | None, Field(description=(
        "The task or question at hand; without one, summaries lead and the most important "
        "memories follow."))] = None,
    budget: Annotated[int, Field(ge=50, le=32000, description=(
        "Tokens at most (the service's WordPiece count)."))] = 2000,
    depth: Annotated[Depth | None, Field(description=(
        "One summary depth for every layer; default: the deepest that fits."))] = None,
    ctx: Context | None = None,
) -> str:
    """What to read before acting, as Markdown within the budget: the layers' summaries and
    the memories most relevant to the query, each memory dated ([13 Oct 2023]) when it says
    when it happened."""
    text = await _call(ctx, "context", query, identifiers=identifiers, budget=budget,
                       depth=depth, markdown=True)
    return str(text or EMPTY_CONTEXT)


@server.tool()
async def memory_summaries(
    identifiers: Identifiers = None,
    depth: Annotated[Depth | None, Field(description="default: each layer's deepest")] = None,
    ctx: Context | None = None,
) -> dict[str, Any]:
    """The summary of every layer the identifiers reach, agent first, with its freshness.
    Returns {"summaries": [...], "totalTokens": n}."""
    return dict(await _call(ctx, "summaries", identifiers=identifiers, depth=depth))


class ChatMessage(BaseModel):
    """One message of a conversation."""

    role: Literal["user", "assistant", "system", "tool"]
    content: Annotated[str, Field(min_length=1, max_length=4000)]
    name: Annotated[str | None, Field(description="Who said it, e.g. the user's name.")] = None


@server.tool()
async def conversation_ingest(
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=500)],
    identifiers: Identifiers = None,
    layer: Annotated[LayerName, Field(description="Whose memories they become.")] = "user",
    ctx: Context | None = None,
) -> dict[str, Any]:
    """Queue a conversation for memory extraction: new facts are added, facts that contradict
    stored ones supersede them, known ones are skipped. Returns {"jobId", "status"}."""
    payload = [m.model_dump(exclude_none=True) for m in messages]
    return dict(await _call(ctx, "ingest_conversation", payload, layer=layer,
                            identifiers=identifiers))


AgentName = Annotated[str, Field(description="The agent's name (letters, digits, . _ - :).")]
ProjectId = Annotated[str, Field(description="The project the agent works in.")]


@server.tool()
async def agent_memories(agent: AgentName, project_id: ProjectId,
                         ctx: Context | None = None) -> dict[str, Any]:
    """The agent's 50 most recent memories of the project, newest first."""
    return dict(await _call(ctx, "agent_memories", agent, project_id=project_id))


@server.tool()
async def agent_memory_add(
    agent: AgentName, project_id: ProjectId,
    content: Annotated[str, Field(description="A learning worth keeping for next time.")],
    ctx: Context | None = None,
) -> dict[str, Any]:
    """Store a learning of the agent for the project (source "manual")."""
    return dict(await _call(ctx, "agent_memory_add", agent, project_id=project_id,
                            content=content))


@server.tool()
async def agent_extract(
    agent: AgentName, project_id: ProjectId,
    transcript: Annotated[str, Field(description="What the agent did, as text.")],
    ctx: Context | None = None,
) -> dict[str, Any]:
    """Queue extraction of new learnings from a run's transcript; known ones are skipped."""
    return dict(await _call(ctx, "agent_extract", agent, project_id=project_id,
                            transcript=transcript))


async def _resource(ctx: Context | None, method: str, *args: Any, **kwargs: Any) -> str:
    try:
        return json.dumps(await _call(ctx, method, *args, **kwargs))
    except ToolError as err:
        raise ResourceError(str(err)) from None


@server.resource("memory://memories/{memory_id}", mime_type="application/json")
async def memory_resource(memory_id: str, ctx: Context | None = None) -> str:
    """A memory as JSON."""
    return await _resource(ctx, "get", memory_id)


@server.resource("memory://agents/{agent}/projects/{project_id}", mime_type="application/json")
async def agent_memories_resource(agent: str, project_id: str,
                                  ctx: Context | None = None) -> str:
    """An agent's 50 most recent memories of a project as JSON."""
    return await _resource(ctx, "agent_memories", agent, project_id=project_id)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``memory-mcp``."""
    parser = argparse.ArgumentParser(prog="memory-mcp", description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=_settings["url"], help="the memory service's URL")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP: the address to bind")
    parser.add_argument("--port", type=int, default=8765, help="HTTP: the port")
    args = parser.parse_args(argv)
    _settings["url"] = args.url
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
