"""Settings of the knowledge graph and its object storage (seed 001 "Dynamic Graph Reasoning"
… "Schema Migration Support"; README "Configuration" lists each variable), read from the
environment. ``memory_project.settings`` takes them all."""

from __future__ import annotations

from pathlib import Path

from memory_project.env import env_bool, env_float, env_int, env_str
from memory_project.paths import VAR_DIR

OBJECT_STORE_DIR = Path(env_str("OBJECT_STORE_DIR", str(VAR_DIR / "objects")))
S3_ENDPOINT_URL = env_str("S3_ENDPOINT_URL", "")  # set: snapshots go to this S3 server
S3_BUCKET = env_str("S3_BUCKET", "memory-graph")
S3_ACCESS_KEY_ID = env_str("S3_ACCESS_KEY_ID", "")
S3_SECRET_ACCESS_KEY = env_str("S3_SECRET_ACCESS_KEY", "")
S3_REGION = env_str("S3_REGION", "us-east-1")
S3_TIMEOUT_SECONDS = env_int("S3_TIMEOUT_SECONDS", 10)
GRAPH_DIR = Path(env_str("GRAPH_DIR", str(VAR_DIR / "graph")))
GRAPH_REDIS_PREFIX = env_str("GRAPH_REDIS_PREFIX", "graph:")
GRAPH_WRITE_TIMEOUT_SECONDS = env_float("GRAPH_WRITE_TIMEOUT_SECONDS", 30.0)
GRAPH_LOCK_TIMEOUT_SECONDS = env_float("GRAPH_LOCK_TIMEOUT_SECONDS", 30.0)
GRAPH_MAX_DEPTH = env_int("GRAPH_MAX_DEPTH", 3)
GRAPH_MAX_PATH_HOPS = env_int("GRAPH_MAX_PATH_HOPS", 6)
GRAPH_EXTRACTION = env_bool("GRAPH_EXTRACTION", True)
GRAPH_EXTRACTOR = env_str("GRAPH_EXTRACTOR", "auto")  # auto | llm | offline
GRAPH_BACKUP_RETENTION_DAYS = env_int("GRAPH_BACKUP_RETENTION_DAYS", 7)
