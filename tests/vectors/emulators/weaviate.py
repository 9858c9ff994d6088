"""Weaviate on local ports: REST (schema, meta, readiness) and gRPC (Search, BatchObjects,
BatchDelete, health) with Weaviate's own message definitions (fixtures in
``fixtures/weaviate``)."""

from __future__ import annotations

import re
import struct
import threading
from concurrent import futures
from typing import Any

import grpc
import numpy as np
from google.protobuf import json_format
from weaviate.proto.v1 import (
    base_pb2,
    batch_delete_pb2,
    batch_pb2,
    health_weaviate_pb2,
    properties_pb2,
    search_get_pb2,
    weaviate_pb2_grpc,
)

from tests.vectors.fixture_server import FixtureServer, Reply, Request, fixture

V = "weaviate"
Op = base_pb2.Filters.Operator


def _floats(data: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def _value(filter_: base_pb2.Filters) -> Any:
    kind = filter_.WhichOneof("test_value")
    value = getattr(filter_, kind)
    if kind and kind.endswith("_array"):
        return list(value.values)
    return value


def evaluate(filter_: base_pb2.Filters, obj: dict[str, Any]) -> bool:
    """Weaviate's filter tree: And, Or, Equal, ContainsAny on properties and ``_id``."""
    if filter_.operator == Op.OPERATOR_AND:
        return all(evaluate(f, obj) for f in filter_.filters)
    if filter_.operator == Op.OPERATOR_OR:
        return any(evaluate(f, obj) for f in filter_.filters)
    name = filter_.target.property if filter_.HasField("target") else filter_.on[0]
    actual = obj["id"] if name == "_id" else obj["properties"].get(name)
    wanted = _value(filter_)
    if filter_.operator == Op.OPERATOR_EQUAL:
        return bool(actual == wanted)
    if filter_.operator == Op.OPERATOR_CONTAINS_ANY:
        return actual in wanted
    raise ValueError(f"operator {filter_.operator} not served here")


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class WeaviateEmulator(FixtureServer):
    """Weaviate 1.32 with no collection at first; ``grpc_calls`` records every gRPC request
    as ``(method, message)``."""

    def __init__(self) -> None:
        super().__init__()
        self.schema: dict[str, Any] = {}
        self.objects: dict[str, dict[str, Any]] = {}
        self.grpc_calls: list[tuple[str, Any]] = []
        self.grpc_faults: list[grpc.StatusCode] = []
        self._grpc: grpc.Server | None = None
        self.grpc_port = 0
        self._glock = threading.Lock()
        self.route("GET", r"/v1/meta", lambda r, m: Reply(200, fixture(V, "meta")))
        self.route("GET", r"/v1/\.well-known/openid-configuration", lambda r, m: Reply(404))
        self.route("GET", r"/v1/\.well-known/ready", lambda r, m: Reply(200))
        self.route("GET", r"/v1/\.well-known/live", lambda r, m: Reply(200))
        self.route("GET", r"/v1/schema/(?P<name>\w+)", self.get_class)
        self.route("POST", r"/v1/schema", self.create_class)

    # --- REST ------------------------------------------------------------------------------

    def get_class(self, request: Request, match: re.Match[str]) -> Reply:
        found = self.schema.get(match["name"])
        return Reply(200, found) if found else Reply(404)

    def create_class(self, request: Request, match: re.Match[str]) -> Reply:
        body = fixture(V, "schema_class")
        body.update(request.body)
        self.schema[body["class"]] = body
        return Reply(200, body)

    # --- gRPC ------------------------------------------------------------------------------

    def start(self, port: int = 0) -> WeaviateEmulator:
        super().start(port)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        weaviate_pb2_grpc.add_WeaviateServicer_to_server(_Servicer(self), server)
        health = grpc.unary_unary_rpc_method_handler(
            self._health,
            request_deserializer=health_weaviate_pb2.WeaviateHealthCheckRequest.FromString,
            response_serializer=health_weaviate_pb2.WeaviateHealthCheckResponse.SerializeToString)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "grpc.health.v1.Health", {"Check": health}),))
        self.grpc_port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc = server
        return self

    def stop(self) -> None:
        super().stop()
        if self._grpc is not None:
            self._grpc.stop(grace=None)
            self._grpc = None

    def _health(self, request: Any, context: Any) -> Any:
        return health_weaviate_pb2.WeaviateHealthCheckResponse(
            status=health_weaviate_pb2.WeaviateHealthCheckResponse.SERVING)

    def called(self, method: str, request: Any, context: Any) -> None:
        with self._glock:
            self.grpc_calls.append((method, request))
            fault = self.grpc_faults.pop(0) if self.grpc_faults else None
        if fault is not None:
            context.abort(fault, f"{fault.name.lower()} (injected)")

    def batch_objects(self, request: batch_pb2.BatchObjectsRequest) -> Any:
        reply = json_format.ParseDict(fixture(V, "batch_objects_reply"),
                                      batch_pb2.BatchObjectsReply())
        for obj in request.objects:
            props = json_format.MessageToDict(obj.properties.non_ref_properties)
            vectors = [_floats(v.vector_bytes) for v in obj.vectors] or (
                [_floats(obj.vector_bytes)] if obj.vector_bytes else [list(obj.vector)])
            self.objects[obj.uuid] = {"id": obj.uuid, "collection": obj.collection,
                                      "properties": props, "vector": vectors[0]}
        return reply

    def batch_delete(self, request: batch_delete_pb2.BatchDeleteRequest) -> Any:
        doomed = [k for k, o in self.objects.items()
                  if o["collection"] == request.collection and evaluate(request.filters, o)]
        for key in doomed:
            del self.objects[key]
        reply = json_format.ParseDict(fixture(V, "batch_delete_reply"),
                                      batch_delete_pb2.BatchDeleteReply())
        reply.matches = reply.successful = len(doomed)
        return reply

    def search(self, request: search_get_pb2.SearchRequest) -> Any:
        kept = [o for o in self.objects.values() if o["collection"] == request.collection
                and (not request.HasField("filters") or evaluate(request.filters, o))]
        scored: list[tuple[dict[str, Any], float | None, float | None]]
        if request.HasField("near_vector"):
            distances = self._distances(request.near_vector, kept)
            limit = request.near_vector.distance if request.near_vector.HasField(
                "distance") else None
            scored = sorted(((o, d, None) for o, d in distances if limit is None or d <= limit),
                            key=lambda s: s[1])
        elif request.HasField("hybrid_search"):
            scored = self._hybrid(request.hybrid_search, kept)
        else:  # fetch objects: sorted by a property (or id), from an offset
            if request.after and request.HasField("filters"):
                raise ValueError("the cursor API cannot be combined with filters")
            path = request.sort_by[0].path[0] if request.sort_by else None
            ordered = sorted(kept, key=lambda o: str(o["properties"].get(path)) if path
                             else o["id"])
            ordered = [o for o in ordered if not request.after or o["id"] > request.after]
            scored = [(o, None, None) for o in ordered[request.offset:]]
        reply = json_format.ParseDict(fixture(V, "search_reply"), search_get_pb2.SearchReply())
        template = reply.results[0]
        del reply.results[:]
        for obj, distance, score in scored[:request.limit or 10]:
            result = search_get_pb2.SearchResult()
            result.CopyFrom(template)
            result.metadata.Clear()
            result.metadata.id = obj["id"]
            if distance is not None:
                result.metadata.distance, result.metadata.distance_present = distance, True
            if score is not None:
                result.metadata.score, result.metadata.score_present = score, True
            if request.metadata.vector or request.metadata.vectors:
                result.metadata.vectors.append(base_pb2.Vectors(
                    name="default", vector_bytes=struct.pack(f"<{len(obj['vector'])}f",
                                                             *obj["vector"])))
            fields = result.properties.non_ref_props.fields
            fields.clear()
            wanted = list(request.properties.non_ref_properties) or list(obj["properties"])
            for name in wanted:
                value = obj["properties"].get(name)
                if isinstance(value, str):
                    fields[name].CopyFrom(properties_pb2.Value(text_value=value))
            reply.results.append(result)
        reply.took = 0.5
        return reply

    def _distances(self, near: Any, objects: list[dict[str, Any]]
                   ) -> list[tuple[dict[str, Any], float]]:
        data = near.vectors[0].vector_bytes if near.vectors else near.vector_bytes
        query = np.asarray(_floats(data) if data else list(near.vector))
        query /= np.linalg.norm(query) or 1.0
        return [(o, float(1.0 - query @ np.asarray(o["vector"]) / (
            np.linalg.norm(o["vector"]) or 1.0))) for o in objects]

    def _hybrid(self, hybrid: Any, objects: list[dict[str, Any]]
                ) -> list[tuple[dict[str, Any], float | None, float | None]]:
        near = hybrid.near_vector if hybrid.HasField("near_vector") else hybrid
        vector_scores = {o["id"]: 1.0 - d for o, d in self._distances(near, objects)}
        terms = set(_words(hybrid.query))
        keyword_scores = {o["id"]: float(sum(
            w in terms for w in _words(str(o["properties"].get("text", ""))))) for o in objects}
        keyword_scores = {k: v for k, v in keyword_scores.items() if v > 0}
        alpha = hybrid.alpha_param if hybrid.use_alpha_param else hybrid.alpha

        def scaled(scores: dict[str, float]) -> dict[str, float]:
            if not scores:
                return {}
            low, high = min(scores.values()), max(scores.values())
            return {k: (v - low) / (high - low) if high > low else 1.0
                    for k, v in scores.items()}

        vector_part, keyword_part = scaled(vector_scores), scaled(keyword_scores)
        fused = {o["id"]: alpha * vector_part.get(o["id"], 0.0)
                 + (1 - alpha) * keyword_part.get(o["id"], 0.0) for o in objects}
        by_id = {o["id"]: o for o in objects}
        return [(by_id[i], None, s) for i, s in sorted(fused.items(), key=lambda x: -x[1])]


class _Servicer(weaviate_pb2_grpc.WeaviateServicer):
    def __init__(self, emulator: WeaviateEmulator) -> None:
        self.emulator = emulator

    def Search(self, request: Any, context: Any) -> Any:
        self.emulator.called("Search", request, context)
        return self.emulator.search(request)

    def BatchObjects(self, request: Any, context: Any) -> Any:
        self.emulator.called("BatchObjects", request, context)
        return self.emulator.batch_objects(request)

    def BatchDelete(self, request: Any, context: Any) -> Any:
        self.emulator.called("BatchDelete", request, context)
        return self.emulator.batch_delete(request)

