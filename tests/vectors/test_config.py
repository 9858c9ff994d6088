"""Backend selection (seed 001 "Backend Configuration"): environment, TOML file, errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vectors import config as config_module
from vectors.config import BACKENDS, QdrantSettings, load_config
from vectors.errors import InvalidBackendConfig

SUPPORTED = ["pgvector", "qdrant", "weaviate", "pinecone", "mongodb", "vertex_ai", "databricks"]


def test_it_defaults_to_pgvector_with_hnsw_and_cosine() -> None:
    config = load_config({})
    assert config.backend == "pgvector"
    assert config.settings.index_type == "hnsw"  # type: ignore[attr-defined]
    assert config.settings.distance == "cosine"


def test_it_reads_the_backend_and_its_settings_from_the_environment() -> None:
    config = load_config({"VECTOR_BACKEND": "Qdrant", "QDRANT_URL": "http://q:6333",
                          "QDRANT_TIMEOUT_SECONDS": "2.5", "QDRANT_DIMENSIONS": "768"})
    assert config.backend == "qdrant"
    assert isinstance(config.settings, QdrantSettings)
    assert (config.settings.url, config.settings.timeout_seconds,
            config.settings.dimensions) == ("http://q:6333", 2.5, 768)


def test_it_reads_the_file_and_the_environment_wins(tmp_path: Path) -> None:
    file = tmp_path / "memory.toml"
    file.write_text('[vector]\nbackend = "qdrant"\n\n[vector.qdrant]\n'
                    'url = "http://from-file:6333"\napi_key = "k"\n')
    from_file = load_config({"MEMORY_CONFIG_FILE": str(file)})
    assert from_file.backend == "qdrant"
    assert from_file.settings.api_key == "k"  # type: ignore[attr-defined]
    assert from_file.settings.url == "http://from-file:6333"  # type: ignore[attr-defined]
    overridden = load_config({"MEMORY_CONFIG_FILE": str(file), "QDRANT_URL": "http://env"})
    assert overridden.settings.url == "http://env"  # type: ignore[attr-defined]
    assert load_config({"MEMORY_CONFIG_FILE": str(file),
                        "VECTOR_BACKEND": "pgvector"}).backend == "pgvector"


def test_an_unknown_backend_lists_the_supported_ones() -> None:
    with pytest.raises(InvalidBackendConfig) as error:
        load_config({"VECTOR_BACKEND": "faiss"})
    envelope = error.value.envelope()["error"]
    assert envelope["code"] == "INVALID_BACKEND_CONFIG"
    assert envelope["details"]["supportedBackends"] == SUPPORTED == list(BACKENDS)
    assert "pgvector, qdrant, weaviate" in envelope["message"]


@pytest.mark.parametrize(("environ", "missing"), [
    ({"VECTOR_BACKEND": "qdrant"}, ["url or path"]),
    ({"VECTOR_BACKEND": "pinecone", "PINECONE_API_KEY": "k"}, ["index"]),
    ({"VECTOR_BACKEND": "databricks", "DATABRICKS_HOST": "h"},
     ["token or client_id", "endpoint", "catalog", "warehouse_id"]),
    ({"VECTOR_BACKEND": "vertex_ai", "VERTEX_AI_PROJECT": "p"},
     ["location", "index", "index_endpoint", "deployed_index_id"]),
])
def test_an_incomplete_configuration_names_what_is_missing(environ: dict[str, str],
                                                           missing: list[str]) -> None:
    with pytest.raises(InvalidBackendConfig) as error:
        load_config(environ)
    assert error.value.details["missing"] == missing
    assert error.value.details["supportedBackends"] == SUPPORTED


def test_wrong_types_and_values_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidBackendConfig) as error:
        load_config({"VECTOR_BACKEND": "qdrant", "QDRANT_PATH": "x", "QDRANT_DIMENSIONS": "a"})
    assert error.value.details["invalid"] == ["dimensions"]
    with pytest.raises(InvalidBackendConfig) as error:
        load_config({"PGVECTOR_INDEX_TYPE": "lsh"})
    assert error.value.details["invalid"] == ["index_type"]
    assert error.value.details["allowed"] == {"index_type": ["hnsw", "ivfflat"]}
    file = tmp_path / "bad.toml"
    file.write_text('[vector.qdrant]\npath = "x"\ncolour = "red"\n')
    with pytest.raises(InvalidBackendConfig) as error:
        load_config({"MEMORY_CONFIG_FILE": str(file), "VECTOR_BACKEND": "qdrant"})
    assert error.value.details["invalid"] == ["colour"]
    file.write_text("[vector\n")
    with pytest.raises(InvalidBackendConfig):
        load_config({"MEMORY_CONFIG_FILE": str(file)})


def test_a_missing_client_library_says_which_extra_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_module, "_installed", lambda module: False)
    with pytest.raises(InvalidBackendConfig) as error:
        load_config({"VECTOR_BACKEND": "weaviate", "WEAVIATE_URL": "http://w:8080"})
    assert "requirements/vectors-weaviate.txt" in error.value.message
    assert error.value.details["missingPackage"] == "weaviate"


def test_the_service_does_not_start_with_an_invalid_backend() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        env={**_environ(), "VECTOR_BACKEND": "nosuch"})
    assert result.returncode != 0
    assert "INVALID_BACKEND_CONFIG" in result.stderr or "Supported backends" in result.stderr
    assert "pgvector, qdrant, weaviate, pinecone, mongodb, vertex_ai, databricks" in (
        result.stderr)


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("VECTOR_")}
