"""An OpenAI-compatible chat server for tests: answers ``POST /v1/chat/completions`` and
``GET /v1/models`` over real HTTP on 127.0.0.1, from a script of behaviours, and records
every request body (the documented request and response shapes of the OpenAI API)."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.http_server import serving


def completion(content: str | None, *, refusal: str | None = None,
               finish_reason: str = "stop", prompt_tokens: int = 50,
               completion_tokens: int = 20) -> dict[str, Any]:
    """A chat completion body as the OpenAI API returns it."""
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
        "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": content,
                                 "refusal": refusal}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class FakeLLM:
    """The script and the record. Behaviours (tuples), used in order; the last one repeats:

    - ``("json", value)``: a completion whose content is ``json.dumps(value)``;
    - ``("text", str)``: a completion with that content;
    - ``("refusal",)``: a completion with a refusal and no content;
    - ``("status", code, headers, body)``: that HTTP answer;
    - ``("hang", seconds)``: answer nothing for that long, then close;
    - ``("raw", bytes)``: a 200 with that body (not JSON);
    - ``("big", n)``: a completion whose content is ``n`` characters.
    """

    def __init__(self) -> None:
        self.script: deque[tuple[Any, ...]] = deque([("json", {})])
        self.requests: list[dict[str, Any]] = []
        self.port = 0

    @property
    def url(self) -> str:
        """The base URL to configure (``LLM_BASE_URL``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def then(self, *behaviours: tuple[Any, ...]) -> FakeLLM:
        """Replace the script."""
        self.script = deque(behaviours)
        return self

    def next(self) -> tuple[Any, ...]:
        return self.script.popleft() if len(self.script) > 1 else self.script[0]


def _handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None
                  ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(200, json.dumps({"object": "list", "data": [
                {"id": "fake-model", "object": "model", "created": 0, "owned_by": "t"}]}
            ).encode())

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            fake.requests.append(json.loads(self.rfile.read(length) or b"{}"))
            kind, *args = fake.next()
            if kind == "json":
                self._send(200, json.dumps(completion(json.dumps(args[0]))).encode())
            elif kind == "text":
                self._send(200, json.dumps(completion(args[0])).encode())
            elif kind == "refusal":
                self._send(200, json.dumps(completion(None, refusal="I can't help")).encode())
            elif kind == "status":
                code, headers, body = args
                self._send(code, body.encode(), headers)
            elif kind == "hang":
                time.sleep(args[0])
            elif kind == "raw":
                self._send(200, args[0])
            elif kind == "big":
                self._send(200, json.dumps(completion("x" * args[0])).encode())

    return Handler


@contextmanager
def fake_llm() -> Iterator[FakeLLM]:
    """A running fake server (stopped on exit)."""
    fake = FakeLLM()
    with serving(_handler(fake)) as port:
        fake.port = port
        yield fake


@contextmanager
def configured_fake_llm(settings: Any) -> Iterator[FakeLLM]:
    """A running fake server that the service is configured to use: model ``fake-model``,
    2 s per call for every purpose, and a price, so usage is counted in money too."""
    with fake_llm() as server:
        settings.LLM_OFFLINE = False
        settings.LLM_BASE_URL = server.url
        settings.LLM_MODEL = "fake-model"
        settings.LLM_TIMEOUTS = json.dumps({purpose: 2 for purpose in (
            "graph", "summarize", "memories", "query", "learnings")})
        settings.LLM_PRICES = '{"fake-model": {"prompt": 1.0, "completion": 2.0}}'
        yield server
