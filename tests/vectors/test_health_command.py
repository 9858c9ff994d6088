"""``manage.py vector_health`` on the configured backend."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from tests.vectors.conftest import _environ
from tests.vectors.emulators.pinecone import PineconeEmulator
from vectors import registry
from vectors.config import load_config


@pytest.mark.django_db
def test_it_reports_pgvector_healthy_with_its_capabilities(
        capsys: pytest.CaptureFixture[str]) -> None:
    registry.reset(load_config({}))
    try:
        call_command("vector_health")
    finally:
        registry.reset()
    status = json.loads(capsys.readouterr().out)
    assert status["backend"] == "pgvector" and status["status"] == "healthy"
    assert status["latencyMs"] >= 0 and status["circuit"] == "closed"
    assert status["capabilities"]["supportsHybridSearch"] is False


def test_it_fails_with_details_when_the_backend_is_down(
        capsys: pytest.CaptureFixture[str]) -> None:
    server = PineconeEmulator().start()
    environ = _environ("pinecone", server)
    server.stop()
    registry.reset(load_config({"VECTOR_BACKEND": "pinecone", **environ}))
    try:
        with pytest.raises(CommandError, match="pinecone is unhealthy"):
            call_command("vector_health")
    finally:
        registry.reset()
    status = json.loads(capsys.readouterr().out)
    assert status["status"] == "unhealthy" and status["errorCode"] == "BACKEND_UNAVAILABLE"
    assert "cannot be reached" in status["details"]
