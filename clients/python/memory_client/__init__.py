"""Typed Python client of the memory service (sync and async) and the ``memory-agent``
command that agents run around their work."""

from memory_client.client import AsyncMemoryClient, MemoryClient
from memory_client.errors import (
    Conflict,
    InvalidRequest,
    MemoryServiceError,
    NotFound,
    PolicyViolation,
    RateLimited,
    ServiceUnavailable,
    ServiceUnreachable,
    Unauthorized,
)

__all__ = [
    "AsyncMemoryClient", "Conflict", "InvalidRequest", "MemoryClient", "MemoryServiceError",
    "NotFound", "PolicyViolation", "RateLimited", "ServiceUnavailable", "ServiceUnreachable",
    "Unauthorized",
]
