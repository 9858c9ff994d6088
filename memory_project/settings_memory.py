"""Settings of memory storage, retrieval and the embedding model (README "Configuration"
lists each variable), read from the environment. ``memory_project.settings`` takes them
all."""

from __future__ import annotations

from memory_project.env import env_bool, env_choice, env_float, env_int, env_str
from memory_project.paths import VAR_DIR

MEMORY_MAX_CONTENT_LENGTH = env_int("MEMORY_MAX_CONTENT_LENGTH", 8000)
MEMORY_MAX_QUERY_LENGTH = env_int("MEMORY_MAX_QUERY_LENGTH", 2000)
MEMORY_MAX_BULK_ITEMS = env_int("MEMORY_MAX_BULK_ITEMS", 500)
MEMORY_DEFAULT_THRESHOLD = env_float("MEMORY_DEFAULT_THRESHOLD", 0.7)
MEMORY_HNSW_EF_SEARCH = env_int("MEMORY_HNSW_EF_SEARCH", 100)
MEMORY_HNSW_EF_SEARCH_MAX = env_int("MEMORY_HNSW_EF_SEARCH_MAX", 1000)  # a starved scan's widest
# Partitions smaller than this are ranked by an exact scan instead of HNSW (performance.md).
MEMORY_EXACT_SCAN_MAX_ROWS = env_int("MEMORY_EXACT_SCAN_MAX_ROWS", 2000)
# The exact scan that stands in for a starved index scan of a large scope, at most this long
# (ms; 0: unbounded); past it the search keeps the index scan's rows (memories.retrieval.semantic)
MEMORY_EXACT_SCAN_TIMEOUT_MS = env_int("MEMORY_EXACT_SCAN_TIMEOUT_MS", 250)
# Tenants with at least this many memories (and at most half the table) get an HNSW index of
# their own, at most MEMORY_TENANT_INDEX_MAX of them (memories.services.tenant_vector_index).
MEMORY_TENANT_INDEX_MIN_ROWS = env_int("MEMORY_TENANT_INDEX_MIN_ROWS", 10_000)
MEMORY_TENANT_INDEX_MAX = env_int("MEMORY_TENANT_INDEX_MAX", 32)
# A tenant with at least this many memories and several times what the planner estimates
# gets the memory table analyzed again (memories.services.planner_statistics).
MEMORY_STATISTICS_MIN_ROWS = env_int("MEMORY_STATISTICS_MIN_ROWS", 500)
# Search and recall count their references after the response, on a background thread
# (memory_project.after_response); off: in the request's thread as the response closes.
AFTER_RESPONSE_IN_BACKGROUND = env_bool("AFTER_RESPONSE_IN_BACKGROUND", True)
# Threads per process that run a search's per-layer semantic and keyword queries at the same
# time (memories.retrieval.concurrency); below 2, they run one after another.
MEMORY_SEARCH_THREADS = env_int("MEMORY_SEARCH_THREADS", 4)
# L1 of seed 004 (memories/tiers/l1.py): entries per process (0: off), and their lifetime.
MEMORY_L1_CACHE_SIZE = env_int("MEMORY_L1_CACHE_SIZE", 10_000)
MEMORY_L1_TTL_SECONDS = env_float("MEMORY_L1_TTL_SECONDS", 300.0)
EMBEDDING_MODEL = env_str("EMBEDDING_MODEL", "all-MiniLM-L6-v2")
# Texts per forward pass, sorted by length: a batch pads to its longest (performance.md).
EMBEDDING_BATCH_SIZE = env_int("EMBEDDING_BATCH_SIZE", 8)
# The bundled model's runtime: "onnx" (ONNX Runtime, exported once from the packaged weights
# into EMBEDDING_ONNX_DIR; same vectors, less CPU) or "torch" (sentence-transformers).
EMBEDDING_RUNTIME = env_choice("EMBEDDING_RUNTIME", "onnx", ("onnx", "torch"))
EMBEDDING_ONNX_DIR = env_str("EMBEDDING_ONNX_DIR", str(VAR_DIR / "models"))
# The model runtime's intra-op threads, ONNX Runtime or torch (0: it decides). One: on 2
# cores shared with PostgreSQL and other workers, two threads spin against each other
# (performance.md).
EMBEDDING_TORCH_THREADS = env_int("EMBEDDING_TORCH_THREADS", 1)
# Batches of one call that ONNX Runtime runs at once, each on its own thread (0: one per
# core): a bulk add uses every core without intra-op threads (threads.py).
EMBEDDING_PARALLEL_BATCHES = env_int("EMBEDDING_PARALLEL_BATCHES", 0)
# Load the local model when a web worker boots (memory_project/wsgi.py).
EMBEDDING_WARMUP = env_bool("EMBEDDING_WARMUP", True)
EMBEDDING_CACHE_SIZE = env_int("EMBEDDING_CACHE_SIZE", 10_000)
EMBEDDING_CACHE_TTL_SECONDS = env_int("EMBEDDING_CACHE_TTL_SECONDS", 7 * 24 * 3600)
