"""Object storage for graph snapshots and backups behind one small interface.

Two implementations of :class:`ObjectStore`:

- :class:`S3Store`: any S3-compatible endpoint through boto3 (seed 001 "S3 Graph
  Persistence").
- :class:`DirectoryStore`: files under a directory, the embedded default (``var/objects/``).

Keys are ``/``-separated strings such as ``"<tenant id>/graph/manifest-v000000000001.json"``.
:func:`object_store` picks one from the settings (``S3_ENDPOINT_URL`` set: S3, else the
directory ``OBJECT_STORE_DIR``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings

from memory_project.errors import BackendUnavailable

#: Attempts per S3 call (the first one included); botocore's "standard" retry mode.
S3_MAX_ATTEMPTS = 3
#: Keys per ListObjectsV2 page and per DeleteObjects request (the S3 maximum).
_BATCH = 1000
_MISSING_CODES = {"NoSuchKey"}


class ObjectMissing(LookupError):
    """The key names no object. ``key`` is the key asked for."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"no object at {key!r}")


class ObjectStoreUnavailable(BackendUnavailable):
    """``BACKEND_UNAVAILABLE`` (HTTP 503, retryable): the object store could not be reached or
    refused the call (endpoint down, timeout, credentials, missing bucket, disk error). The
    original error is the ``__cause__``."""

    default_message = "The object store is unavailable; retry shortly."

    def __init__(self, message: str | None = None, *, key: str = "") -> None:
        super().__init__(message, details={"backend": "object_store", "key": key})


class ObjectStore(Protocol):
    """What graph persistence needs from an object store.

    Every method raises :class:`ObjectStoreUnavailable` when the store cannot serve it.
    """

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` at ``key``, replacing any object there (atomically)."""

    def get(self, key: str) -> bytes:
        """The object at ``key``. Raises :class:`ObjectMissing` when there is none."""

    def list(self, prefix: str) -> list[str]:
        """Every key that starts with ``prefix`` (a plain string prefix), sorted."""

    def delete(self, keys: Sequence[str]) -> None:
        """Delete these keys; keys without an object are ignored."""

    def copy(self, source: str, target: str) -> None:
        """Copy the object at ``source`` to ``target``. Raises :class:`ObjectMissing`."""

    def ping(self) -> None:
        """Check that the store answers (bucket exists, directory writable)."""


def _check_key(key: str) -> str:
    """``key`` unchanged when it is a safe relative key, else :class:`ValueError`."""
    if not key or key.startswith("/") or "\\" in key or "\x00" in key or ".." in key:
        raise ValueError(f"invalid object key {key!r}")
    if any(part in ("", ".") or part.startswith(".") for part in key.split("/")):
        raise ValueError(f"invalid object key {key!r}")
    return key


class DirectoryStore:
    """Objects as files under ``root``: key ``a/b/c`` is the file ``root/a/b/c``.

    Keys must be relative, without ``..``, backslashes, empty segments or segments that start
    with a dot (:class:`ValueError`). A put writes a temporary dot-file next to the target and
    renames it over the target (``os.replace``), so readers see the old or the new object,
    never a partial one. OS errors other than a missing file raise
    :class:`ObjectStoreUnavailable`.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"DirectoryStore({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*_check_key(key).split("/"))

    @contextlib.contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        try:
            yield
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise ObjectMissing(key) from exc
        except OSError as exc:
            raise ObjectStoreUnavailable(_directory_error(exc), key=key) from exc

    def _write_atomic(self, path: Path, fill: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                fill(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` to the key's file atomically (see the class docstring)."""
        path = self._path(key)
        try:
            self._write_atomic(path, lambda handle: handle.write(data))
        except OSError as exc:
            raise ObjectStoreUnavailable(_directory_error(exc), key=key) from exc

    def get(self, key: str) -> bytes:
        """The file's bytes. Raises :class:`ObjectMissing` when the file does not exist."""
        path = self._path(key)
        with self._errors(key):
            return path.read_bytes()

    def list(self, prefix: str) -> list[str]:
        """Keys starting with ``prefix``, sorted; temporary dot-files are not keys."""
        if prefix.startswith("/") or "\\" in prefix or ".." in prefix:
            raise ValueError(f"invalid object key prefix {prefix!r}")
        directory = prefix.rpartition("/")[0]
        base = self.root.joinpath(*directory.split("/")) if directory else self.root
        keys: list[str] = []
        try:
            for dirpath, dirnames, filenames in os.walk(base, onerror=_raise_unless_missing):
                dirnames[:] = [name for name in dirnames if not name.startswith(".")]
                relative = Path(dirpath).relative_to(self.root).as_posix()
                for name in filenames:
                    if name.startswith("."):
                        continue
                    key = name if relative == "." else f"{relative}/{name}"
                    if key.startswith(prefix):
                        keys.append(key)
        except OSError as exc:
            raise ObjectStoreUnavailable(_directory_error(exc)) from exc
        return sorted(keys)

    def delete(self, keys: Sequence[str]) -> None:
        """Remove the files (missing ones ignored) and the directories left empty."""
        for key in keys:
            path = self._path(key)
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                raise ObjectStoreUnavailable(
                    _directory_error(exc), key=key) from exc
            parent = path.parent
            while parent != self.root and self.root in parent.parents:
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent

    def copy(self, source: str, target: str) -> None:
        """Copy the source file to the target key atomically."""
        source_path, target_path = self._path(source), self._path(target)
        if not source_path.is_file():
            raise ObjectMissing(source)
        with self._errors(source), source_path.open("rb") as src:
            self._write_atomic(target_path, lambda handle: shutil.copyfileobj(src, handle))

    def ping(self) -> None:
        """Create the root directory if needed and check that it is writable."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ObjectStoreUnavailable(_directory_error(exc)) from exc
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise ObjectStoreUnavailable("object store directory is not writable")


def _directory_error(exc: OSError) -> str:
    """The message of a failed file operation, without the server's paths."""
    return f"object store directory error ({exc.strerror or type(exc).__name__})"


def _raise_unless_missing(exc: OSError) -> None:
    if not isinstance(exc, FileNotFoundError):
        raise exc


def _is_missing(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") in _MISSING_CODES


class S3Store:
    """Objects in one bucket of an S3-compatible service, through a boto3 S3 ``client``
    (see :func:`s3_client`); ``batch``: keys per list page and per delete request (S3's
    maximum, 1,000, by default).

    Every botocore error (endpoint unreachable, timeout, denied, no such bucket) raises
    :class:`ObjectStoreUnavailable` with the botocore error as its cause, except a missing
    key on :meth:`get` and :meth:`copy`, which raises :class:`ObjectMissing`.
    """

    def __init__(self, bucket: str, client: Any, *, batch: int = _BATCH) -> None:
        self.bucket = bucket
        self.client = client
        self.batch = batch

    def __repr__(self) -> str:
        return f"S3Store({self.bucket!r}, {self.client.meta.endpoint_url!r})"

    @contextlib.contextmanager
    def _errors(self, operation: str, key: str = "", *, missing: bool = False) -> Iterator[None]:
        try:
            yield
        except ClientError as exc:
            if missing and _is_missing(exc):
                raise ObjectMissing(key) from exc
            code = exc.response.get("Error", {}).get("Code", "")
            raise ObjectStoreUnavailable(
                f"object store {operation} failed ({code or type(exc).__name__})",
                key=key) from exc
        except BotoCoreError as exc:
            raise ObjectStoreUnavailable(
                f"object store {operation} failed ({type(exc).__name__})", key=key) from exc

    def put(self, key: str, data: bytes) -> None:
        """``PutObject`` (atomic in S3: readers see the old or the new object)."""
        with self._errors("put", key):
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get(self, key: str) -> bytes:
        """``GetObject`` and read the body; :class:`ObjectMissing` on ``NoSuchKey``."""
        with self._errors("get", key, missing=True):
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            body = response["Body"]
            try:
                return bytes(body.read())
            finally:
                body.close()

    def list(self, prefix: str) -> list[str]:
        """``ListObjectsV2`` pages (``batch`` keys each) under ``prefix``, sorted."""
        keys: list[str] = []
        with self._errors("list", prefix):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix,
                                           PaginationConfig={"PageSize": self.batch}):
                keys.extend(item["Key"] for item in page.get("Contents", ()))
        return sorted(keys)

    def delete(self, keys: Sequence[str]) -> None:
        """``DeleteObjects``, ``batch`` keys per request; a per-key error raises
        :class:`ObjectStoreUnavailable`."""
        for start in range(0, len(keys), self.batch):
            batch = keys[start:start + self.batch]
            with self._errors("delete", batch[0]):
                response = self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True})
            errors = response.get("Errors") or []
            if errors:
                first = errors[0]
                raise ObjectStoreUnavailable(
                    f"object store delete failed for {len(errors)} keys, first "
                    f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message')}",
                    key=str(first.get("Key", "")))

    def copy(self, source: str, target: str) -> None:
        """Server-side ``CopyObject`` (objects up to 5 GB)."""
        with self._errors("copy", source, missing=True):
            self.client.copy_object(
                Bucket=self.bucket, Key=target,
                CopySource={"Bucket": self.bucket, "Key": source})

    def ping(self) -> None:
        """``HeadBucket``: the endpoint answers and the bucket exists and is accessible."""
        with self._errors("ping"):
            self.client.head_bucket(Bucket=self.bucket)


def s3_client(
    *,
    endpoint_url: str | None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    region: str = "us-east-1",
    timeout_seconds: float = 10.0,
    max_attempts: int = S3_MAX_ATTEMPTS,
) -> Any:
    """A boto3 S3 client with bounded waiting: connect and read timeouts of
    ``timeout_seconds`` each and at most ``max_attempts`` attempts per call (first included).

    Empty credentials fall back to boto3's own chain (environment, instance role). With an
    ``endpoint_url``, path-style addressing (what MinIO, Ceph and other S3-compatible
    servers expect). Checksums are only sent where S3 requires them: snapshots carry their
    own SHA-256 in their manifest.
    """
    config = Config(
        connect_timeout=timeout_seconds,
        read_timeout=timeout_seconds,
        retries={"total_max_attempts": max_attempts, "mode": "standard"},
        s3={"addressing_style": "path"} if endpoint_url else None,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint_url or None,
        aws_access_key_id=access_key_id or None,
        aws_secret_access_key=secret_access_key or None,
        region_name=region,
        config=config,
    )


@functools.cache
def object_store() -> ObjectStore:
    """This process's object store, built once from the settings: an :class:`S3Store` on
    ``S3_BUCKET`` at ``S3_ENDPOINT_URL`` when that is set, else a :class:`DirectoryStore` at
    ``OBJECT_STORE_DIR`` (default ``var/objects/``)."""
    if settings.S3_ENDPOINT_URL:
        client = s3_client(
            endpoint_url=settings.S3_ENDPOINT_URL,
            access_key_id=settings.S3_ACCESS_KEY_ID,
            secret_access_key=settings.S3_SECRET_ACCESS_KEY,
            region=settings.S3_REGION,
            timeout_seconds=float(settings.S3_TIMEOUT_SECONDS),
        )
        return S3Store(settings.S3_BUCKET, client)
    return DirectoryStore(Path(settings.OBJECT_STORE_DIR))


def reset_object_store() -> None:
    """Forget the cached store, so that the next :func:`object_store` reads the settings
    again (tests, after changing them)."""
    object_store.cache_clear()
