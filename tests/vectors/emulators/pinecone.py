"""Pinecone's control and data plane as documented (fixtures in ``fixtures/pinecone``)."""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.vectors.fixture_server import FixtureServer, Reply, Request, VectorStore, fixture

V = "pinecone"


def evaluate(filter_: dict[str, Any] | None, metadata: dict[str, Any]) -> bool:
    """Pinecone's metadata filter language: ``$and``, ``$or``, ``$eq``, ``$ne``, ``$in``."""
    if not filter_:
        return True
    for key, condition in filter_.items():
        if key == "$and":
            if not all(evaluate(c, metadata) for c in condition):
                return False
            continue
        if key == "$or":
            if not any(evaluate(c, metadata) for c in condition):
                return False
            continue
        ops = condition if isinstance(condition, dict) else {"$eq": condition}
        for op, operand in ops.items():
            value = metadata.get(key)
            if op == "$eq" and value != operand:
                return False
            if op == "$ne" and value == operand:
                return False
            if op == "$in" and value not in operand:
                return False
            if op not in {"$eq", "$ne", "$in"}:
                raise ValueError(op)
    return True


class PineconeEmulator(FixtureServer):
    """Index ``memories``; namespaces keep vectors apart."""

    def __init__(self, *, index_exists: bool = True) -> None:
        super().__init__()
        self.store = VectorStore()
        self.index_exists = index_exists
        self.route("GET", r"/indexes/(?P<name>[^/]+)", self.describe_index)
        self.route("POST", r"/indexes", self.create_index, fixture(V, "create_index_request"))
        self.route("POST", r"/vectors/upsert", self.upsert, fixture(V, "upsert_request"))
        self.route("POST", r"/query", self.query, fixture(V, "query_request"))
        self.route("GET", r"/vectors/fetch", self.fetch)
        self.route("POST", r"/vectors/delete", self.delete, fixture(V, "delete_request"))
        self.route("GET", r"/vectors/list", self.list)
        self.route("POST", r"/describe_index_stats", self.stats)

    def describe_index(self, request: Request, match: re.Match[str]) -> Reply:
        if not self.index_exists or match["name"] != "memories":
            return Reply(404, fixture(V, "not_found_response"))
        body = fixture(V, "describe_index_response")
        body["host"] = self.url
        return Reply(200, body)

    def create_index(self, request: Request, match: re.Match[str]) -> Reply:
        self.index_exists = True
        body = fixture(V, "describe_index_response")
        dense = request.body["schema"]["fields"]["_values"]
        body.update(host=self.url, name=request.body["name"])
        body["schema"]["fields"]["_values"].update(metric=dense["metric"],
                                                   dimension=dense["dimension"])
        return Reply(201, body)

    def upsert(self, request: Request, match: re.Match[str]) -> Reply:
        vectors = request.body["vectors"]
        if len(vectors) > 1000:
            return Reply(400, {"error": {"code": "INVALID_ARGUMENT",
                                         "message": "max 1000 vectors per upsert"},
                               "status": 400})
        for vector in vectors:
            self.store.put(request.body.get("namespace", ""), vector["id"], vector)
        return Reply(200, {"upsertedCount": len(vectors)})

    def query(self, request: Request, match: re.Match[str]) -> Reply:
        body = request.body
        namespace = body.get("namespace", "")
        try:
            found = self.store.nearest(
                namespace, body["vector"], body["topK"],
                keep=lambda e: evaluate(body.get("filter"), e.get("metadata") or {}))
        except ValueError as exc:
            return Reply(400, {"error": {"code": "INVALID_ARGUMENT",
                                         "message": f"bad filter operator {exc}"},
                               "status": 400})
        reply = fixture(V, "query_response")
        template = reply["matches"][0]
        reply["matches"] = [
            {**copy.deepcopy(template), "id": item_id, "score": score, "values": [],
             "metadata": entry.get("metadata") or {}} for item_id, score, entry in found]
        reply["namespace"] = namespace
        return Reply(200, reply)

    def fetch(self, request: Request, match: re.Match[str]) -> Reply:
        namespace = request.query.get("namespace", [""])[0]
        stored = self.store.items(namespace)
        reply = fixture(V, "fetch_response")
        reply["vectors"] = {i: {"id": i, "values": stored[i]["values"],
                                "metadata": stored[i].get("metadata") or {}}
                            for i in request.query.get("ids", []) if i in stored}
        reply["namespace"] = namespace
        return Reply(200, reply)

    def delete(self, request: Request, match: re.Match[str]) -> Reply:
        self.store.remove(request.body.get("namespace", ""), request.body.get("ids", []))
        return Reply(200, {})

    def list(self, request: Request, match: re.Match[str]) -> Reply:
        namespace = request.query.get("namespace", [""])[0]
        limit = int(request.query.get("limit", ["100"])[0])
        after = request.query.get("paginationToken", [""])[0]
        ids = sorted(i for i in self.store.items(namespace) if i > after)
        page = ids[:limit]
        reply = fixture(V, "list_response")
        reply["vectors"] = [{"id": i} for i in page]
        reply["namespace"] = namespace
        if len(ids) > limit:
            reply["pagination"] = {"next": page[-1]}
        else:
            reply.pop("pagination")
        return Reply(200, reply)

    def stats(self, request: Request, match: re.Match[str]) -> Reply:
        reply = fixture(V, "describe_index_stats_response")
        reply["namespaces"] = {ns: {"vectorCount": len(items)}
                               for ns, items in self.store.partitions.items()}
        reply["totalVectorCount"] = sum(len(i) for i in self.store.partitions.values())
        return Reply(200, reply)
