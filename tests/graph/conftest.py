"""Object stores for the graph persistence tests: a directory under ``tmp_path`` and a bucket on
moto's S3-compatible HTTP server (one server per test module, one bucket per test), plus a
store wrapper that counts calls and fails on demand."""

from __future__ import annotations

import socket
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from graph.objects import DirectoryStore, ObjectStore, S3Store, s3_client


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of a moto S3 server running for the module."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def s3_store_at(endpoint: str, bucket: str, *, timeout: float = 5.0,
                attempts: int = 2) -> S3Store:
    """An :class:`S3Store` on ``bucket`` at ``endpoint`` with moto's dummy credentials."""
    client = s3_client(endpoint_url=endpoint, access_key_id="testing",
                       secret_access_key="testing", region="us-east-1",
                       timeout_seconds=timeout, max_attempts=attempts)
    return S3Store(bucket, client)


@pytest.fixture(scope="module")
def s3_module_store(s3_endpoint: str) -> S3Store:
    """One client for the module (building a boto3 client takes a few hundred ms)."""
    return s3_store_at(s3_endpoint, "unused")


@pytest.fixture
def s3_store(s3_module_store: S3Store) -> S3Store:
    """A fresh, empty bucket of its own."""
    store = S3Store(f"graph-{uuid.uuid4().hex[:16]}", s3_module_store.client)
    store.client.create_bucket(Bucket=store.bucket)
    return store


@pytest.fixture(params=["directory", "s3"])
def objects(request: pytest.FixtureRequest, tmp_path: Any) -> ObjectStore:
    """Each test that uses it runs against a :class:`DirectoryStore` and an :class:`S3Store`."""
    if request.param == "directory":
        return DirectoryStore(tmp_path / "objects")
    s3: S3Store = request.getfixturevalue("s3_store")
    return s3


def closed_port() -> int:
    """A local TCP port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class InjectedFault(RuntimeError):
    """What :class:`RecordingStore` raises when told to fail."""


class RecordingStore:
    """Passes every call to ``inner``, records ``(method, key)`` in ``calls``, and raises
    :class:`InjectedFault` on the ``fail_at``-th call of method ``fail_on`` (the object store
    behind it is left exactly as that call found it)."""

    def __init__(self, inner: ObjectStore, *, fail_on: str = "", fail_at: int = 1) -> None:
        self.inner = inner
        self.fail_on, self.fail_at = fail_on, fail_at
        self.calls: list[tuple[str, str]] = []
        self.counts: Counter[str] = Counter()

    def _record(self, method: str, key: str) -> None:
        self.calls.append((method, key))
        self.counts[method] += 1
        if method == self.fail_on and self.counts[method] == self.fail_at:
            raise InjectedFault(f"injected failure of {method} #{self.fail_at} ({key})")

    def keys(self, method: str) -> list[str]:
        """The keys passed to ``method``, in call order."""
        return [key for name, key in self.calls if name == method]

    def put(self, key: str, data: bytes) -> None:
        self._record("put", key)
        self.inner.put(key, data)

    def get(self, key: str) -> bytes:
        self._record("get", key)
        return self.inner.get(key)

    def list(self, prefix: str) -> list[str]:
        self._record("list", prefix)
        return self.inner.list(prefix)

    def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._record("delete", key)
        self.inner.delete(keys)

    def copy(self, source: str, target: str) -> None:
        self._record("copy", target)
        self.inner.copy(source, target)

    def ping(self) -> None:
        self._record("ping", "")
        self.inner.ping()
