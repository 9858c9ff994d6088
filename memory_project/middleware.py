"""Request-size limit answered with the error envelope (413) before the body is read."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from memory_project.errors import InvalidInput, PayloadTooLarge, envelope_response


class BodySizeLimitMiddleware:
    """Answer 413 ``PAYLOAD_TOO_LARGE`` when ``Content-Length`` exceeds the configured limit.

    Bodies without a length (chunked) are still bounded by Django's own check, which the
    API's exception handler maps to the same 413.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return envelope_response(InvalidInput("Invalid Content-Length header."))
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and length > limit:
            return envelope_response(
                PayloadTooLarge(
                    f"The request body has {length} bytes; the limit is {limit}.",
                    details={"max_bytes": limit},
                )
            )
        return self.get_response(request)
