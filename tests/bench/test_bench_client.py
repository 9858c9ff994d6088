"""The bench's HTTP client keeps working when the server closes an idle keep-alive
connection, as gunicorn does after ``--keep-alive`` seconds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from bench.http import Client, free_port
from tests.http_server import serving


class _ClosesAfterEachAnswer(BaseHTTPRequestHandler):
    """Answers ``{"n": <request number>}`` with keep-alive headers, then closes the connection
    without saying so (an idle timeout on the server's side)."""

    protocol_version = "HTTP/1.1"
    connections: list[int] = []
    requests = 0

    def setup(self) -> None:
        super().setup()
        type(self).connections.append(1)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).requests += 1
        body = json.dumps({"n": type(self).requests}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def closing_server() -> Iterator[int]:
    _ClosesAfterEachAnswer.connections = []
    _ClosesAfterEachAnswer.requests = 0
    with serving(_ClosesAfterEachAnswer) as port:
        yield port


def test_a_request_after_the_server_closed_the_connection_is_sent_again(
        closing_server: int) -> None:
    client = Client(closing_server, "key")
    answers = [client.request("POST", "/x", {"q": i}) for i in range(3)]
    assert [(status, body) for status, body, _ in answers] == [
        (200, {"n": 1}), (200, {"n": 2}), (200, {"n": 3})]
    assert len(_ClosesAfterEachAnswer.connections) == 3  # each request sent once, on its own


def test_a_server_that_is_not_there_is_an_error() -> None:
    with pytest.raises(OSError):
        Client(free_port(), "key").request("GET", "/health")
