"""A local HTTP server that answers a vendor's documented API from recorded fixtures.

Each vendor emulator (``tests/vectors/emulators/``) registers routes; a route's handler
reads the request, keeps the vectors it was given (brute-force cosine search over them, so
tenant isolation and filters have an observable effect) and answers with the vendor's
documented response, built from the JSON fixtures in ``tests/vectors/fixtures/<vendor>/``
(each folder's NOTE.md names the API version and the documentation page).

Every request is recorded (method, path, query, headers, JSON body) for assertions, and
each request body is checked against the documented request example: a key the adapter
sends that the example does not have fails the request with 400 (a misspelt field would
otherwise go unnoticed). ``fail_next(n, status, body)`` makes the next ``n`` requests answer
an error (rate limits, outages); ``stop()`` closes the port (the backend is down).
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(vendor: str, name: str) -> Any:
    """The JSON fixture ``fixtures/<vendor>/<name>.json``."""
    return json.loads((FIXTURES / vendor / f"{name}.json").read_text())


@dataclass
class Request:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    """What a handler answers: status, JSON body, extra headers."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request, re.Match[str]], Reply]


def undocumented_keys(sent: Any, documented: Any, path: str = "") -> list[str]:
    """Keys of ``sent`` (recursively) that the documented example does not have.

    Lists are compared element-wise against the example's first element; values of
    ``metadata``/``filter``-like free-form objects are not checked (``documented`` ``{}``).
    """
    if isinstance(sent, dict) and isinstance(documented, dict):
        if not documented:
            return []
        extra = []
        for key, value in sent.items():
            if key not in documented:
                extra.append(f"{path}{key}")
            else:
                extra.extend(undocumented_keys(value, documented[key], f"{path}{key}."))
        return extra
    if isinstance(sent, list) and isinstance(documented, list) and documented:
        return [k for item in sent for k in undocumented_keys(item, documented[0], path)]
    return []


class FixtureServer:
    """The server; see the module docstring."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, re.Pattern[str], Handler, Any]] = []
        self.requests: list[Request] = []
        self._faults: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    def route(self, method: str, pattern: str, handler: Handler,
              documented_request: Any = None) -> None:
        """Serve ``method`` on paths matching ``pattern`` (a full-match regex)."""
        self.routes.append((method, re.compile(pattern), handler, documented_request))

    def fail_next(self, count: int, status: int, body: Any = None,
                  headers: dict[str, str] | None = None) -> None:
        """Answer the next ``count`` requests with ``status`` and ``body``."""
        with self._lock:
            self._faults.extend(Reply(status, body, headers or {}) for _ in range(count))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, port: int = 0) -> FixtureServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
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

    def bodies(self, path_pattern: str) -> list[Any]:
        """JSON bodies of the requests whose path matches ``path_pattern``."""
        pattern = re.compile(path_pattern)
        return [r.body for r in self.requests if pattern.fullmatch(r.path)]

    def _dispatch(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._faults:
                return self._faults.popleft()
        for method, pattern, handler, documented in self.routes:
            match = pattern.fullmatch(request.path)
            if method == request.method and match:
                extra = undocumented_keys(request.body, documented) if documented else []
                if extra:
                    return Reply(400, {"error": f"undocumented fields: {extra}"})
                return handler(request, match)
        return Reply(404, {"error": f"no route {request.method} {request.path}"})

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: stop() is a real outage

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _serve(self) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                request = Request(self.command, split.path, parse_qs(split.query),
                                  {k.lower(): v for k, v in self.headers.items()}, body)
                try:
                    reply = outer._dispatch(request)
                except Exception as exc:  # a bug in an emulator: show it in the test
                    reply = Reply(500, {"error": f"emulator: {type(exc).__name__}: {exc}"})
                data = b"" if reply.body is None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

        return _Handler


class VectorStore:
    """The emulators' vectors: per partition (namespace, tenant, collection), id → entry;
    search is exact cosine similarity."""

    def __init__(self) -> None:
        self.partitions: dict[str, dict[str, dict[str, Any]]] = {}
        self.lock = threading.Lock()

    def put(self, partition: str, item_id: str, entry: dict[str, Any]) -> None:
        with self.lock:
            self.partitions.setdefault(partition, {})[item_id] = entry

    def items(self, partition: str) -> dict[str, dict[str, Any]]:
        with self.lock:
            return dict(self.partitions.get(partition, {}))

    def remove(self, partition: str, ids: list[str]) -> None:
        with self.lock:
            for item_id in ids:
                self.partitions.get(partition, {}).pop(item_id, None)

    def nearest(self, partition: str, vector: list[float], limit: int,
                keep: Callable[[dict[str, Any]], bool] = lambda e: True,
                key: str = "values") -> list[tuple[str, float, dict[str, Any]]]:
        """``(id, cosine similarity, entry)`` of the ``limit`` nearest kept entries."""
        query = np.asarray(vector, dtype=np.float64)
        query /= np.linalg.norm(query) or 1.0
        scored = []
        for item_id, entry in self.items(partition).items():
            if not keep(entry):
                continue
            other = np.asarray(entry[key], dtype=np.float64)
            scored.append((item_id, float(query @ other / (np.linalg.norm(other) or 1.0)),
                           entry))
        scored.sort(key=lambda s: (-s[1], s[0]))
        return scored[:limit]
