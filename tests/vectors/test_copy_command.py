"""``manage.py vector_copy``: a tenant's vectors from one backend to another, verified."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.vectors.cases import records, run
from tests.vectors.conftest import _environ, _pgvector_case
from tests.vectors.emulators.pinecone import PineconeEmulator
from tests.vectors.emulators.vertex_ai import VertexAiEmulator
from tests.vectors.fixture_server import Reply, Request
from vectors.base import SearchQuery
from vectors.config import load_config
from vectors.registry import build

pytestmark = pytest.mark.django_db


def test_it_copies_pgvector_to_qdrant_and_verifies(tenant_a: Any, tenant_b: Any,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    source = _pgvector_case(tenant_a, tenant_b)
    tenant = str(tenant_a.tenant.id)
    items = records(40, "copy")
    source.store(tenant, items)
    source.store(str(tenant_b.tenant.id), records(5, "other"))
    monkeypatch.setenv("QDRANT_PATH", str(tmp_path / "qdrant"))
    call_command("vector_copy", tenant=tenant_a.tenant.slug, source="pgvector",
                 target="qdrant", batch=16, sample=10)
    out = capsys.readouterr().out
    assert "40 vectors read from pgvector, 40 written to qdrant; target holds 40/40" in out
    assert "overlap 1.000 over 10 samples" in out and "verified" in out
    qdrant = build(load_config(backend="qdrant"))
    try:
        hits = run(qdrant.search, tenant, SearchQuery(vector=items[7].vector, limit=1))
        assert hits[0].id == items[7].id
        assert run(qdrant.search, str(tenant_b.tenant.id),
                   SearchQuery(vector=items[7].vector)) == []  # only the named tenant
    finally:
        run(qdrant.close)


class _LossyPinecone(PineconeEmulator):
    """Drops every fifth vector it is asked to store."""

    def upsert(self, request: Request, match: Any) -> Reply:
        request.body["vectors"] = [v for i, v in enumerate(request.body["vectors"]) if i % 5]
        return super().upsert(request, match)


def test_a_copy_that_loses_vectors_fails_verification(tenant_a: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    server = _LossyPinecone().start()
    try:
        for key, value in _environ("pinecone", server).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("QDRANT_PATH", str(tmp_path / "q"))
        qdrant = build(load_config(backend="qdrant"))
        run(qdrant.upsert, str(tenant_a.tenant.id), records(20, "lossy"))
        run(qdrant.close)
        with pytest.raises(CommandError, match=r"16/20 vectors in the target"):
            call_command("vector_copy", tenant=str(tenant_a.tenant.id), source="qdrant",
                         target="pinecone")
    finally:
        server.stop()


def test_it_refuses_a_source_that_cannot_list_its_vectors(
        tenant_a: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CommandError, match="INVALID_BACKEND_CONFIG"):
        call_command("vector_copy", tenant=tenant_a.tenant.slug, source="vertex_ai",
                     target="pgvector")
    server = VertexAiEmulator()  # configured, never called: capabilities answer locally
    for key, value in _environ("vertex_ai", server).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(CommandError, match="cannot list its vectors"):
        call_command("vector_copy", tenant=tenant_a.tenant.slug, source="vertex_ai",
                     target="pgvector")
