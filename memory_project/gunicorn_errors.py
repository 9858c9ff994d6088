"""gunicorn's own error answers in the API's envelope.

gunicorn refuses some requests before the application sees them: a request line over its
limit (414), header fields over their limits (431), a malformed request (400). It answers
them with an HTML page of its own; :func:`envelope_error` replaces that page with the JSON
error envelope every other answer uses. gunicorn has no hook for this page, so
``memory_project.gunicorn_conf.post_worker_init`` puts :func:`envelope_error` in place of
``gunicorn.util.write_error`` in each worker.
"""

from __future__ import annotations

import json
from typing import Any

from gunicorn import util

#: HTTP status → the envelope's code.
CODES = {400: "INVALID_INPUT", 403: "UNAUTHORIZED", 414: "URI_TOO_LONG",
         417: "INVALID_INPUT", 431: "HEADERS_TOO_LARGE", 500: "INTERNAL_ERROR",
         501: "INVALID_INPUT"}


def envelope_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """Write ``status_int`` as the JSON error envelope (``mesg``, gunicorn's detail, is
    left out: it echoes the request)."""
    body = json.dumps({"error": {
        "code": CODES.get(status_int, "INVALID_INPUT"), "message": f"{reason}.",
        "operation": "", "details": {}, "retryable": False}}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode(
        "latin1")
    util.write_nonblock(sock, head + body)


def install() -> None:
    """Make gunicorn answer its own errors with :func:`envelope_error`."""
    util.write_error = envelope_error
