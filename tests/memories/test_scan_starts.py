"""How a scope's semantic ranking starts (``memories.retrieval.semantic._scan_starts``): an
exact scan is remembered only for a scope where it is cheap, and what was learned expires
five minutes after it was learned, however often the scope is searched. The exact scan
that stands in for a large scope's starved index scan is bounded in time."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from cachetools import TTLCache
from django.db import connection, transaction

from memories.models import Memory
from memories.retrieval import semantic
from tenants.context import tenant_scope
from tests.retrieval_helpers import add_unit_vectors

pytestmark = pytest.mark.django_db

ROWS, LIMIT = 12, 5


@pytest.fixture
def scope(tenant_a: Any, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``ROWS`` memories with random unit embeddings; the index path for every scope; a
    fresh, empty record of scan starts."""
    settings.MEMORY_EXACT_SCAN_MAX_ROWS = 1
    monkeypatch.setattr(semantic, "_scan_starts", TTLCache(maxsize=16, ttl=300))
    return tenant_a, add_unit_vectors(tenant_a, ROWS, seed=11)


def ranked(tenant: Any, query: np.ndarray) -> list[Any]:
    with transaction.atomic(), tenant_scope(tenant.ctx):
        return semantic.nearest_distances(Memory.objects.filter(layer="user"), query, LIMIT)


def starving_once(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Index scans return one row until the first exact scan; records each scan's
    ``exact``."""
    scans: list[bool] = []
    exact_seen: list[bool] = []
    real = semantic._ranked

    def scan(base: Any, vector: Any, metric: Any, limit: int, *, exact: bool) -> Any:
        scans.append(exact)
        rows = real(base, vector, metric, limit, exact=exact)
        if exact:
            exact_seen.append(True)
        return rows if exact or exact_seen else rows[:1]

    monkeypatch.setattr(semantic, "_ranked", scan)
    return scans


def test_a_large_scope_that_starves_once_is_answered_exactly_then_searched_by_index(
        scope: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    tenant, query = scope
    monkeypatch.setattr(semantic, "EXACT_CHEAP_ROWS", ROWS)  # the scope is not below it
    scans = starving_once(monkeypatch)
    first = ranked(tenant, query)
    assert scans[-1] is True and len(first) == LIMIT  # widened to the widest, then exact
    scans.clear()
    assert ranked(tenant, query) == first
    assert scans == [False]  # the index again, at the width it started from
    assert list(semantic._scan_starts.values()) == [semantic._first(
        semantic.pgvector_settings(), LIMIT)]


def test_a_small_scope_that_starves_is_scanned_exactly_from_then_on(
        scope: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    tenant, query = scope
    monkeypatch.setattr(semantic, "EXACT_CHEAP_ROWS", ROWS + 1)
    scans = starving_once(monkeypatch)
    first = ranked(tenant, query)
    scans.clear()
    assert ranked(tenant, query) == first
    assert scans == [True]
    assert list(semantic._scan_starts.values()) == [semantic.EXACT]


def test_what_was_learned_expires_five_minutes_after_it_was_learned(
        scope: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    tenant, query = scope
    now = [0.0]
    monkeypatch.setattr(semantic, "_scan_starts", TTLCache(maxsize=16, ttl=300,
                                                           timer=lambda: now[0]))
    ranked(tenant, query)
    for now[0] in (100.0, 200.0, 299.0):  # searched all the time
        ranked(tenant, query)
        assert len(semantic._scan_starts) == 1
    now[0] = 301.0
    assert len(semantic._scan_starts) == 0  # learned at 0: gone at 300, not at 599


def starving_with_slow_exact(monkeypatch: pytest.MonkeyPatch, sleep_s: float) -> None:
    """Index scans return two rows; an exact scan first sleeps ``sleep_s`` in the database
    (within whatever ``statement_timeout`` the scan runs under)."""
    real = semantic._ranked

    def scan(base: Any, vector: Any, metric: Any, limit: int, *, exact: bool) -> Any:
        if exact and sleep_s:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_sleep(%s)", [sleep_s])
        rows = real(base, vector, metric, limit, exact=exact)
        return rows if exact else rows[:2]

    monkeypatch.setattr(semantic, "_ranked", scan)


def _statement_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('statement_timeout')")
        return str(cursor.fetchone()[0])


def ranked_and_after(tenant: Any, query: np.ndarray) -> tuple[list[Any], bool]:
    """The ranking, and whether the transaction's ``statement_timeout`` after it is what it
    was before (the transaction still usable)."""
    with transaction.atomic(), tenant_scope(tenant.ctx):
        before = _statement_timeout()
        found = semantic.nearest_distances(Memory.objects.filter(layer="user"), query, LIMIT)
        return found, _statement_timeout() == before


def exact_top(tenant: Any, query: np.ndarray) -> list[Any]:
    with transaction.atomic(), tenant_scope(tenant.ctx):
        rows = semantic._ranked(Memory.objects.filter(layer="user"), query,
                                semantic.pgvector_settings().metric, LIMIT, exact=True)
    return [(pk, distance) for pk, distance, _ in rows]


def test_a_large_scope_s_exact_scan_over_its_time_leaves_the_index_rows(
        scope: Any, monkeypatch: pytest.MonkeyPatch, settings: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    tenant, query = scope
    monkeypatch.setattr(semantic, "EXACT_CHEAP_ROWS", ROWS)  # the scope is not below it
    index_rows = exact_top(tenant, query)[:2]  # the index scan's two rows are the nearest
    settings.MEMORY_EXACT_SCAN_TIMEOUT_MS = 50
    starving_with_slow_exact(monkeypatch, 2.0)
    started = time.monotonic()
    found, restored = ranked_and_after(tenant, query)
    assert time.monotonic() - started < 1.5  # cancelled at 50 ms, not slept for 2 s
    assert found == index_rows
    assert restored  # the transaction's setting as it was, and usable
    assert "exact semantic scan over 50 ms" in caplog.text


def test_a_large_scope_s_exact_scan_within_its_time_is_exact(
        scope: Any, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    tenant, query = scope
    monkeypatch.setattr(semantic, "EXACT_CHEAP_ROWS", ROWS)
    settings.MEMORY_EXACT_SCAN_TIMEOUT_MS = 5000
    starving_with_slow_exact(monkeypatch, 0.0)
    found, restored = ranked_and_after(tenant, query)
    assert found == exact_top(tenant, query) and len(found) == LIMIT
    assert restored


def test_no_time_bound_when_the_setting_is_zero(
        scope: Any, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    tenant, query = scope
    monkeypatch.setattr(semantic, "EXACT_CHEAP_ROWS", ROWS)
    settings.MEMORY_EXACT_SCAN_TIMEOUT_MS = 0
    expected = exact_top(tenant, query)
    starving_with_slow_exact(monkeypatch, 0.2)
    found, _ = ranked_and_after(tenant, query)
    assert found == expected


def test_a_scope_too_large_to_count_in_time_keeps_the_index_rows_without_an_exact_scan(
        scope: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tenant, query = scope
    index_rows = exact_top(tenant, query)[:2]
    starving_with_slow_exact(monkeypatch, 0.0)
    scans: list[bool] = []
    starving = semantic._ranked
    monkeypatch.setattr(semantic, "_ranked", lambda *a, exact, **k: scans.append(exact)
                        or starving(*a, exact=exact, **k))
    monkeypatch.setattr(semantic, "_count_up_to", lambda base, bound: None)  # out of time
    found, _ = ranked_and_after(tenant, query)
    assert found == index_rows and True not in scans
    assert "too large to count" in caplog.text
