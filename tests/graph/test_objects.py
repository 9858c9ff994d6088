"""The object stores (``graph.objects``) behave alike on a directory and on an S3-compatible
server: put/get/list/delete/copy/ping, missing keys, errors of an unreachable endpoint, and the
store the settings choose."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from botocore.exceptions import BotoCoreError
from django.test import override_settings

from graph.objects import (
    DirectoryStore,
    ObjectMissing,
    ObjectStore,
    ObjectStoreUnavailable,
    S3Store,
    object_store,
    reset_object_store,
)
from tests.graph.conftest import closed_port, s3_store_at


def test_it_puts_gets_and_overwrites(objects: ObjectStore) -> None:
    objects.put("t/graph/a.bin", b"one")
    assert objects.get("t/graph/a.bin") == b"one"
    objects.put("t/graph/a.bin", b"two")
    assert objects.get("t/graph/a.bin") == b"two"
    objects.put("t/graph/empty.bin", b"")
    assert objects.get("t/graph/empty.bin") == b""


def test_it_raises_object_missing_for_an_unknown_key(objects: ObjectStore) -> None:
    with pytest.raises(ObjectMissing) as caught:
        objects.get("t/graph/nothing.bin")
    assert caught.value.key == "t/graph/nothing.bin"
    with pytest.raises(ObjectMissing):
        objects.copy("t/graph/nothing.bin", "t/graph/copy.bin")
    assert objects.list("t/") == []


def test_it_lists_by_plain_prefix_sorted(objects: ObjectStore) -> None:
    for key in ("b/graph/x", "a/graph/parts/m-01.parquet", "a/graph/parts/m-00.parquet",
                "a/graph/manifest-v000000000002.json", "a/graph/manifest-v000000000001.json",
                "a/graphite"):
        objects.put(key, key.encode())
    assert objects.list("a/graph/") == [
        "a/graph/manifest-v000000000001.json", "a/graph/manifest-v000000000002.json",
        "a/graph/parts/m-00.parquet", "a/graph/parts/m-01.parquet"]
    assert objects.list("a/graph/manifest-v") == [
        "a/graph/manifest-v000000000001.json", "a/graph/manifest-v000000000002.json"]
    assert objects.list("a/graph") == [*objects.list("a/graph/"), "a/graphite"]
    assert objects.list("c/") == []
    assert len(objects.list("")) == 6


def test_it_deletes_many_keys_and_ignores_missing_ones(objects: ObjectStore) -> None:
    for name in ("1", "2", "3"):
        objects.put(f"t/graph/d/{name}", b"x")
    objects.delete(["t/graph/d/1", "t/graph/d/3", "t/graph/d/never"])
    assert objects.list("t/") == ["t/graph/d/2"]
    objects.delete([])
    objects.delete(["t/graph/d/2"])
    assert objects.list("t/") == []


def test_it_copies(objects: ObjectStore) -> None:
    objects.put("t/graph/_tmp/x/a", b"payload")
    objects.copy("t/graph/_tmp/x/a", "t/graph/parts/a-v1")
    assert objects.get("t/graph/parts/a-v1") == b"payload"
    assert objects.get("t/graph/_tmp/x/a") == b"payload"


def test_it_pings(objects: ObjectStore) -> None:
    objects.ping()


def test_it_rejects_keys_that_leave_the_directory(tmp_path: Path) -> None:
    objects = DirectoryStore(tmp_path / "objects")
    for key in ("../escape", "a/../../escape", "/etc/passwd", "a\\b", "", "a//b", "a/./b",
                "a/.hidden"):
        with pytest.raises(ValueError):
            objects.put(key, b"x")
        with pytest.raises(ValueError):
            objects.get(key)
    with pytest.raises(ValueError):
        objects.list("../")
    assert not (tmp_path / "escape").exists()


def test_it_writes_files_atomically_and_tidies_directories(tmp_path: Path) -> None:
    objects = DirectoryStore(tmp_path / "objects")
    objects.put("t/graph/parts/a", b"x" * 100_000)
    files = [p.name for p in (tmp_path / "objects/t/graph/parts").iterdir()]
    assert files == ["a"]  # no temporary file left next to it
    objects.delete(["t/graph/parts/a"])
    assert list((tmp_path / "objects").iterdir()) == []


def test_it_lists_and_deletes_more_than_one_page(s3_store: S3Store) -> None:
    paged = S3Store(s3_store.bucket, s3_store.client, batch=2)
    keys = [f"t/graph/parts/p-{i:02d}" for i in range(7)]
    for key in reversed(keys):
        paged.put(key, b"")
    assert paged.list("t/graph/parts/") == keys
    paged.delete(keys[:5])
    assert paged.list("t/") == keys[5:]


def test_it_reports_an_unreachable_endpoint_fast() -> None:
    objects = s3_store_at(f"http://127.0.0.1:{closed_port()}", "memory-graph", timeout=1.0,
                          attempts=2)
    sends: list[str] = []
    objects.client.meta.events.register(
        "before-send.s3", lambda **kwargs: sends.append(kwargs["request"].url))
    started = time.monotonic()
    for call in (objects.ping, lambda: objects.get("k"), lambda: objects.put("k", b"x"),
                 lambda: objects.list("k"), lambda: objects.delete(["k"]),
                 lambda: objects.copy("k", "l")):
        with pytest.raises(ObjectStoreUnavailable) as caught:
            call()
        assert isinstance(caught.value.__cause__, BotoCoreError)
    assert time.monotonic() - started < 15
    assert len(sends) == 6 * 2  # two attempts per call, no more
    envelope = caught.value.envelope()["error"]
    assert envelope["code"] == "BACKEND_UNAVAILABLE"
    assert envelope["retryable"] is True
    assert envelope["details"]["backend"] == "object_store"


def test_it_reports_a_missing_bucket_as_unavailable(s3_endpoint: str) -> None:
    objects = s3_store_at(s3_endpoint, "no-such-bucket")
    with pytest.raises(ObjectStoreUnavailable):
        objects.ping()
    with pytest.raises(ObjectStoreUnavailable):
        objects.get("k")  # NoSuchBucket is not a missing key
    with pytest.raises(ObjectStoreUnavailable):
        objects.put("k", b"x")


def test_it_builds_the_store_from_the_settings(tmp_path: Path, s3_endpoint: str) -> None:
    try:
        with override_settings(S3_ENDPOINT_URL="", OBJECT_STORE_DIR=tmp_path / "o"):
            reset_object_store()
            directory = object_store()
            assert isinstance(directory, DirectoryStore)
            assert directory.root == tmp_path / "o"
            assert object_store() is directory
        with override_settings(S3_ENDPOINT_URL=s3_endpoint, S3_BUCKET="settings-bucket",
                               S3_ACCESS_KEY_ID="testing", S3_SECRET_ACCESS_KEY="testing",
                               S3_TIMEOUT_SECONDS=3):
            reset_object_store()
            s3 = object_store()
            assert isinstance(s3, S3Store)
            assert s3.bucket == "settings-bucket"
            assert s3.client.meta.endpoint_url == s3_endpoint
            s3.client.create_bucket(Bucket="settings-bucket")
            s3.put("t/graph/x", b"ok")
            assert s3.get("t/graph/x") == b"ok"
    finally:
        reset_object_store()
