"""A MongoDB server on a local TCP port, at the driver's wire boundary (OP_MSG + BSON), with
Atlas Vector Search's ``$vectorSearch`` and ``$listSearchIndexes`` (fixtures in
``fixtures/mongodb``; see its NOTE.md for why the wire and not HTTP)."""

from __future__ import annotations

import contextlib
import copy
import socket
import socketserver
import struct
import threading
from collections import deque
from typing import Any

import bson
import numpy as np

from tests.vectors.fixture_server import fixture

V = "mongodb"
OP_REPLY, OP_QUERY, OP_MSG = 1, 2004, 2013


def _get(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def evaluate(query: dict[str, Any], document: dict[str, Any]) -> bool:
    """The MQL subset the adapter sends: equality, ``$eq``, ``$in``, ``$gt``, ``$and``."""
    for key, condition in query.items():
        if key == "$and":
            if not all(evaluate(c, document) for c in condition):
                return False
            continue
        value = _get(document, key)
        if isinstance(condition, dict) and any(k.startswith("$") for k in condition):
            for op, operand in condition.items():
                if op == "$eq" and value != operand:
                    return False
                if op == "$in" and value not in operand:
                    return False
                if op == "$gt" and not (value is not None and value > operand):
                    return False
        elif value != condition:
            return False
    return True


def _paths(query: dict[str, Any]) -> set[str]:
    paths: set[str] = set()
    for key, condition in query.items():
        if key == "$and":
            for part in condition:
                paths |= _paths(part)
        else:
            paths.add(key)
    return paths


class MongoEmulator:
    """The server. ``commands`` records every command document; ``fail_next`` makes the
    next commands (other than the handshake) answer an error document."""

    def __init__(self, *, index: dict[str, Any] | None = None) -> None:
        self.collections: dict[str, dict[str, dict[str, Any]]] = {}
        self.index = copy.deepcopy(index if index is not None else fixture(V, "search_index"))
        self.commands: list[dict[str, Any]] = []
        self._faults: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._connections: set[Any] = set()
        self.port = 0

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    def start(self) -> MongoEmulator:
        outer = self

        class _Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer._connections.add(self.request)
                try:
                    outer._serve(self.request)
                except OSError:  # the client or stop() closed the connection
                    pass
                finally:
                    outer._connections.discard(self.request)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
            for connection in list(self._connections):  # a real outage: drop open sockets
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)

    def fail_next(self, count: int, reply: dict[str, Any]) -> None:
        with self._lock:
            self._faults.extend(copy.deepcopy(reply) for _ in range(count))

    def named(self, command: str) -> list[dict[str, Any]]:
        """The recorded commands named ``command``."""
        return [c for c in self.commands if next(iter(c)) == command]

    # --- wire --------------------------------------------------------------------------------

    def _serve(self, sock: Any) -> None:
        while self._server is not None:
            header = _read(sock, 16)
            if header is None:
                return
            length, request_id, _, opcode = struct.unpack("<iiii", header)
            payload = _read(sock, length - 16)
            if payload is None:
                return
            if opcode == OP_QUERY:
                reply = self._command(_op_query(payload))
                docs = bson.encode(reply)
                body = struct.pack("<iqii", 0, 0, 0, 1) + docs
                sock.sendall(struct.pack("<iiii", 16 + len(body), request_id + 1, request_id,
                                         OP_REPLY) + body)
            elif opcode == OP_MSG:
                reply = self._command(_op_msg(payload))
                body = struct.pack("<I", 0) + b"\x00" + bson.encode(reply)
                sock.sendall(struct.pack("<iiii", 16 + len(body), request_id + 1, request_id,
                                         OP_MSG) + body)
            else:
                return

    def _command(self, command: dict[str, Any]) -> dict[str, Any]:
        name = next(iter(command))
        self.commands.append(command)
        if name.lower() in {"hello", "ismaster"}:
            return fixture(V, "hello_response")
        with self._lock:
            if self._faults and name not in {"endSessions"}:
                return self._faults.popleft()
        handler = getattr(self, f"_cmd_{name}", None)
        if handler is None:
            return {"ok": 0.0, "errmsg": f"no such command: '{name}'", "code": 59,
                    "codeName": "CommandNotFound"}
        return handler(command)

    # --- commands ----------------------------------------------------------------------------

    def _collection(self, command: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
        return self.collections.setdefault(f"{command['$db']}.{command[name]}", {})

    def _cursor(self, command: dict[str, Any], name: str, batch: list[Any]) -> dict[str, Any]:
        return {"cursor": {"id": bson.int64.Int64(0), "ns": f"{command['$db']}.{command[name]}",
                           "firstBatch": batch}, "ok": 1.0}

    def _cmd_ping(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"ok": 1.0}

    def _cmd_endSessions(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"ok": 1.0}

    def _cmd_update(self, command: dict[str, Any]) -> dict[str, Any]:
        collection = self._collection(command, "update")
        n = modified = 0
        upserted = []
        for index, update in enumerate(command["updates"]):
            matched = [d for d in collection.values() if evaluate(update["q"], d)]
            replacement = dict(update["u"])
            if matched:
                replacement["_id"] = matched[0]["_id"]
                collection[matched[0]["_id"]] = replacement
                n, modified = n + 1, modified + 1
            elif update.get("upsert"):
                replacement.setdefault("_id", update["q"].get("_id"))
                collection[replacement["_id"]] = replacement
                upserted.append({"index": index, "_id": replacement["_id"]})
                n += 1
        reply: dict[str, Any] = {"n": n, "nModified": modified, "ok": 1.0}
        if upserted:
            reply["upserted"] = upserted
        return reply

    def _cmd_delete(self, command: dict[str, Any]) -> dict[str, Any]:
        collection = self._collection(command, "delete")
        n = 0
        for delete in command["deletes"]:
            for key in [k for k, d in collection.items() if evaluate(delete["q"], d)]:
                del collection[key]
                n += 1
        return {"n": n, "ok": 1.0}

    def _cmd_find(self, command: dict[str, Any]) -> dict[str, Any]:
        documents = [d for d in self._collection(command, "find").values()
                     if evaluate(command.get("filter", {}), d)]
        if command.get("sort"):
            documents.sort(key=lambda d: d["_id"])
        if command.get("limit"):
            documents = documents[:command["limit"]]
        projection = command.get("projection")
        if projection:
            documents = [{k: d[k] for k in ("_id", *projection) if k in d} for d in documents]
        return self._cursor(command, "find", documents)

    def _cmd_aggregate(self, command: dict[str, Any]) -> dict[str, Any]:
        pipeline = command["pipeline"]
        first = next(iter(pipeline[0]))
        if first == "$listSearchIndexes":
            wanted = pipeline[0][first].get("name")
            found = [self.index] if self.index and wanted in (None, self.index["name"]) else []
            return self._cursor(command, "aggregate", found)
        if first == "$vectorSearch":
            return self._vector_search(command, pipeline)
        return {"ok": 0.0, "errmsg": f"Unrecognized pipeline stage name: '{first}'",
                "code": 40324, "codeName": "Location40324"}

    def _vector_search(self, command: dict[str, Any], pipeline: list[Any]) -> dict[str, Any]:
        stage = pipeline[0]["$vectorSearch"]
        documented = fixture(V, "vector_search_stage")["$vectorSearch"]
        extra = set(stage) - set(documented)
        if extra:
            return {"ok": 0.0, "errmsg": f"$vectorSearch: unknown fields {sorted(extra)}",
                    "code": 9, "codeName": "FailedToParse"}
        if not self.index or stage["index"] != self.index["name"]:
            return self._cursor(command, "aggregate", [])  # Atlas: no results, no error
        filters = {f["path"] for f in self.index["latestDefinition"]["fields"]
                   if f["type"] == "filter"}
        for path in sorted(_paths(stage.get("filter", {})) - filters):
            error = fixture(V, "filter_not_indexed_error")
            error["errmsg"] = error["errmsg"].replace("metadata.rank", path)
            return error
        if not stage["limit"] <= stage["numCandidates"] <= 10000:
            return {"ok": 0.0, "errmsg": "numCandidates must be within [limit, 10000]",
                    "code": 2, "codeName": "BadValue"}
        query = np.asarray(stage["queryVector"], dtype=np.float64)
        query /= np.linalg.norm(query) or 1.0
        scored = []
        for document in self._collection(command, "aggregate").values():
            if not evaluate(stage.get("filter", {}), document):
                continue
            vector = np.asarray(document[stage["path"]], dtype=np.float64)
            cosine = float(query @ vector / (np.linalg.norm(vector) or 1.0))
            scored.append(((1.0 + cosine) / 2.0, document))
        scored.sort(key=lambda s: -s[0])
        results = []
        for score, document in scored[:stage["limit"]]:
            out = dict(document)
            for later in pipeline[1:]:
                if "$project" in later:
                    out = _project(later["$project"], document, score)
            results.append(out)
        return self._cursor(command, "aggregate", results)


def _project(spec: dict[str, Any], document: dict[str, Any], score: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.get("_id", 1):
        out["_id"] = document["_id"]
    for key, value in spec.items():
        if key == "_id":
            continue
        if isinstance(value, dict) and value.get("$meta") == "vectorSearchScore":
            out[key] = score
        elif value and key in document:
            out[key] = document[key]
    return out


def _read(sock: Any, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _op_query(payload: bytes) -> dict[str, Any]:
    end = payload.index(b"\x00", 4)
    document_start = end + 1 + 8
    size = struct.unpack("<i", payload[document_start:document_start + 4])[0]
    command = bson.decode(payload[document_start:document_start + size])
    command.setdefault("$db", payload[4:end].decode().split(".")[0])
    return command


def _op_msg(payload: bytes) -> dict[str, Any]:
    flags = struct.unpack("<I", payload[:4])[0]
    end = len(payload) - (4 if flags & 1 else 0)
    position = 4
    body: dict[str, Any] = {}
    sequences: dict[str, list[Any]] = {}
    while position < end:
        kind = payload[position]
        position += 1
        size = struct.unpack("<i", payload[position:position + 4])[0]
        if kind == 0:
            body = bson.decode(payload[position:position + size])
        else:
            name_end = payload.index(b"\x00", position + 4)
            name = payload[position + 4:name_end].decode()
            sequences[name] = bson.decode_all(payload[name_end + 1:position + size])
        position += size
    body.update(sequences)
    return body

