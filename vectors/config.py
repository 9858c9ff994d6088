"""Which vector backend runs, and its settings (seed 001 "Backend Configuration").

The backend is named by the environment variable ``VECTOR_BACKEND`` or, when that is unset,
by ``vector.backend`` in the TOML file that ``MEMORY_CONFIG_FILE`` points to; default
``pgvector``. A backend's settings come from ``<BACKEND>_<SETTING>`` environment variables
(``QDRANT_URL``, ``VERTEX_AI_PROJECT``, ...) or the file's ``[vector.<backend>]`` table;
the environment wins. Example::

    [vector]
    backend = "qdrant"

    [vector.qdrant]
    url = "http://qdrant:6333"
    api_key = "..."

An unknown backend, a missing required setting, a value of the wrong type or a backend whose
client library is not installed raises :class:`InvalidBackendConfig` (at start-up: the
``vectors`` app loads the configuration in ``ready()``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from vectors.base import DistanceMetric
from vectors.errors import InvalidBackendConfig

#: Vector size of the default embedding model (all-MiniLM-L6-v2).
DEFAULT_DIMENSIONS = 384


@dataclass(frozen=True)
class BackendSettings:
    """Settings every backend has. ``REQUIRED``: groups of settings of which at least one
    must be set; ``CHOICES``: allowed values per setting.

    ``timeout_seconds`` bounds one request to the backend; ``operation_timeout_seconds`` one
    trait operation, retries of the client library included (Weaviate's client retries an
    unavailable server for about 30 s; the memory system should fall back sooner).
    """

    dimensions: int = DEFAULT_DIMENSIONS
    distance: str = DistanceMetric.COSINE.value
    timeout_seconds: float = 10.0
    operation_timeout_seconds: float = 30.0

    REQUIRED: ClassVar[tuple[tuple[str, ...], ...]] = ()
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "distance": tuple(m.value for m in DistanceMetric)}
    #: Importable module of the backend's client library (``None``: none needed).
    CLIENT_MODULE: ClassVar[str | None] = None
    #: The requirements file that installs it.
    EXTRA: ClassVar[str] = ""

    @property
    def metric(self) -> DistanceMetric:
        """``distance`` as a :class:`DistanceMetric`."""
        return DistanceMetric(self.distance)


@dataclass(frozen=True)
class PgvectorSettings(BackendSettings):
    """pgvector on the service's PostgreSQL (seed 001 "pgvector Backend"): HNSW (default,
    m 16, ef_construction 64) or IVFFlat (``lists``) over the memories table, cosine by
    default."""

    index_type: str = "hnsw"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    ivfflat_lists: int = 100
    ivfflat_probes: int = 10

    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        **BackendSettings.CHOICES, "index_type": ("hnsw", "ivfflat")}


@dataclass(frozen=True)
class QdrantSettings(BackendSettings):
    """Qdrant: a server (``url``, ``api_key``) or the embedded local mode (``path``: a
    directory, or ``:memory:``). One collection per tenant: ``<collection_prefix><tenant>``."""

    url: str = ""
    path: str = ""
    api_key: str = ""
    collection_prefix: str = "memories_"

    REQUIRED: ClassVar[tuple[tuple[str, ...], ...]] = (("url", "path"),)
    CLIENT_MODULE: ClassVar[str | None] = "qdrant_client"
    EXTRA: ClassVar[str] = "requirements/vectors-qdrant.txt"


@dataclass(frozen=True)
class WeaviateSettings(BackendSettings):
    """Weaviate: REST at ``url``, gRPC at ``grpc_host:grpc_port`` (default: the URL's host,
    port 50051). One collection; each object carries ``tenant_id`` and every query filters
    on it. ``alpha``: hybrid weight of the vector ranking (Weaviate's default 0.5)."""

    url: str = ""
    grpc_host: str = ""
    grpc_port: int = 50051
    api_key: str = ""
    collection: str = "Memory"
    alpha: float = 0.5

    REQUIRED: ClassVar[tuple[tuple[str, ...], ...]] = (("url",),)
    CLIENT_MODULE: ClassVar[str | None] = "weaviate"
    EXTRA: ClassVar[str] = "requirements/vectors-weaviate.txt"


@dataclass(frozen=True)
class PineconeSettings(BackendSettings):
    """Pinecone: ``index`` (created serverless in ``cloud``/``region`` when missing and
    ``create_index``), one namespace per tenant. ``host`` skips the index lookup;
    ``control_plane_host`` replaces ``https://api.pinecone.io``. Rate-limited calls are
    retried ``max_retries`` times with exponential backoff from ``backoff_seconds`` up to
    ``backoff_max_seconds``."""

    api_key: str = ""
    index: str = ""
    host: str = ""
    control_plane_host: str = ""
    cloud: str = "aws"
    region: str = "us-east-1"
    create_index: bool = True
    max_retries: int = 5
    backoff_seconds: float = 0.5
    backoff_max_seconds: float = 20.0

    REQUIRED: ClassVar[tuple[tuple[str, ...], ...]] = (("api_key",), ("index",))
    CLIENT_MODULE: ClassVar[str | None] = "pinecone"
    EXTRA: ClassVar[str] = "requirements/vectors-pinecone.txt"


@dataclass(frozen=True)
class MongodbSettings(BackendSettings):
    """MongoDB Atlas Vector Search: ``uri``, ``database``.``collection`` with the Atlas
    Vector Search index ``index`` (checked at start; it must index ``embedding`` and have
    ``tenant_id`` and the filtered metadata fields as filter fields). ``num_candidates``
    per result: ``candidates_factor`` (Atlas recommends 10-20)."""

    uri: str = ""
    database: str = "memory"
    collection: str = "memory_vectors"
    index: str = "memory_vector_index"
    candidates_factor: int = 15

    REQUIRED: ClassVar[tuple[tuple[str, ...], ...]] = (("uri",),)
    CLIENT_MODULE: ClassVar[str | None] = "pymongo"
    EXTRA: ClassVar[str] = "requirements/vectors-mongodb.txt"


@dataclass(frozen=True)
class VertexAiSettings(BackendSettings):
    """Vertex AI Vector Search: ``project``, ``location``, the ``index`` (streaming updates)
    and the ``index_endpoint`` it is deployed to as ``deployed_index_id``. Queries go to
    ``public_endpoint_domain`` when set (a public endpoint), else to ``api_endpoint``
    (default ``<location>-aiplatform.googleapis.com``). Credentials: Application Default
    Credentials, or the service-account file ``credentials_file``."""

    project: str = ""
    location: str = ""
    index: str = ""
    index_endpoint: str = ""
    deployed_index_id: str = ""
    api_endpoint: str = ""
    public_endpoint_domain: str = ""
    credentials_file: str = ""
    batch_size: int = 1000

    REQUIRED: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("project",), ("location",), ("index",), ("index_endpoint",), ("deployed_index_id",))
    CLIENT_MODULE: ClassVar[str | None] = "google.cloud.aiplatform_v1"
    EXTRA: ClassVar[str] = "requirements/vectors-vertex_ai.txt"


@dataclass(frozen=True)
class DatabricksSettings(BackendSettings):
    """Databricks Mosaic AI Vector Search: workspace ``host``, a PAT ``token`` or OAuth
    ``client_id``/``client_secret``, the vector search ``endpoint`` and the SQL
    ``warehouse_id`` that writes the Delta tables. Per tenant, Unity Catalog schema
    ``<catalog>.<schema_prefix><tenant>`` holds the Delta table ``table`` (Change Data
    Feed on) and its Delta Sync index ``<table>_index``; ``grant_principal`` is granted
    read access to it."""

    host: str = ""
    token: str = ""
    client_id: str = ""
    client_secret: str = ""
    endpoint: str = ""
    catalog: str = ""
    schema_prefix: str = "memory_"
    table: str = "memory_vectors"
    warehouse_id: str = ""
    grant_principal: str = ""

    REQUIRED: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("host",), ("token", "client_id"), ("endpoint",), ("catalog",), ("warehouse_id",))
    CLIENT_MODULE: ClassVar[str | None] = "databricks.sdk"
    EXTRA: ClassVar[str] = "requirements/vectors-databricks.txt"


#: Every supported backend and its settings, in the order the errors list them.
BACKENDS: dict[str, type[BackendSettings]] = {
    "pgvector": PgvectorSettings,
    "qdrant": QdrantSettings,
    "weaviate": WeaviateSettings,
    "pinecone": PineconeSettings,
    "mongodb": MongodbSettings,
    "vertex_ai": VertexAiSettings,
    "databricks": DatabricksSettings,
}
DEFAULT_BACKEND = "pgvector"


@dataclass(frozen=True)
class VectorConfig:
    """The configured backend's name and settings."""

    backend: str
    settings: BackendSettings


def load_config(environ: dict[str, str] | None = None, backend: str | None = None
                ) -> VectorConfig:
    """Read the vector backend configuration (see the module docstring).

    Args:
        environ: variables to read (``os.environ`` by default).
        backend: a backend name that overrides ``VECTOR_BACKEND`` and the file (for copying
            between backends); its settings are still read from the environment and file.

    Raises:
        InvalidBackendConfig: unknown backend, missing or ill-typed setting, unreadable
            file, or a client library that is not installed.
    """
    env = dict(os.environ if environ is None else environ)
    file = _read_file(env.get("MEMORY_CONFIG_FILE", ""))
    section = file.get("vector", {})
    name = (backend or env.get("VECTOR_BACKEND") or section.get("backend")
            or DEFAULT_BACKEND).strip().lower()
    supported = list(BACKENDS)
    settings_class = BACKENDS.get(name)
    if settings_class is None:
        raise InvalidBackendConfig(f"Unknown vector backend {name!r}.", backend=name,
                                   supported=supported)
    values = _values(name, settings_class, env, section.get(name, {}))
    settings = settings_class(**values)
    _check(name, settings)
    return VectorConfig(backend=name, settings=settings)


def _read_file(path: str) -> dict[str, Any]:
    if not path:
        return {}
    try:
        with Path(path).open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InvalidBackendConfig(
            f"MEMORY_CONFIG_FILE {path!r} cannot be read ({exc}).", backend="",
            supported=list(BACKENDS)) from exc


def _values(name: str, settings_class: type[BackendSettings], env: dict[str, str],
            table: dict[str, Any]) -> dict[str, Any]:
    """Each setting from ``<NAME>_<SETTING>`` or the file's table, coerced to its type."""
    known = {f.name: f for f in fields(settings_class)}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise InvalidBackendConfig(f"Unknown settings for {name}: {', '.join(unknown)}.",
                                   backend=name, supported=list(BACKENDS), invalid=unknown)
    values: dict[str, Any] = {}
    invalid: list[str] = []
    for key, spec in known.items():
        raw = env.get(f"{name}_{key}".upper(), table.get(key))
        if raw is None:
            continue
        try:
            values[key] = _coerce(raw, spec.default)
        except (TypeError, ValueError):
            invalid.append(key)
    if invalid:
        raise InvalidBackendConfig(f"Settings of {name} have the wrong type: "
                                   f"{', '.join(invalid)}.", backend=name,
                                   supported=list(BACKENDS), invalid=invalid)
    return values


def _coerce(raw: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in {"1", "true", "yes", "on"}:
            return True
        if text in {"0", "false", "no", "off"}:
            return False
        raise ValueError(raw)
    if isinstance(default, int):
        if isinstance(raw, float | bool):
            raise TypeError(raw)
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    if not isinstance(raw, str):
        raise TypeError(raw)
    return raw.strip()


def _check(name: str, settings: BackendSettings) -> None:
    supported = list(BACKENDS)
    missing = [" or ".join(group) for group in settings.REQUIRED
               if not any(getattr(settings, key) for key in group)]
    if missing:
        env_names = [" or ".join(f"{name}_{k}".upper() for k in group.split(" or "))
                     for group in missing]
        raise InvalidBackendConfig(
            f"The {name} backend needs {'; '.join(env_names)}.", backend=name,
            supported=supported, missing=missing)
    invalid = [key for key, allowed in settings.CHOICES.items()
               if getattr(settings, key) not in allowed]
    if settings.dimensions < 1:
        invalid.append("dimensions")
    if invalid:
        raise InvalidBackendConfig(
            f"Settings of {name} out of range: {', '.join(invalid)}.", backend=name,
            supported=supported, invalid=invalid,
            allowed={k: list(settings.CHOICES.get(k, ())) for k in invalid})
    module = settings.CLIENT_MODULE
    if module and not _installed(module):
        raise InvalidBackendConfig(
            f"The {name} backend needs its client library: pip install -r {settings.EXTRA}.",
            backend=name, supported=supported, missingPackage=module)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def replace(config: VectorConfig, **changes: Any) -> VectorConfig:
    """``config`` with some settings changed (tests, the copy command)."""
    return VectorConfig(config.backend, dataclasses.replace(config.settings, **changes))
