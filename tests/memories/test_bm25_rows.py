"""The keyword list's memories come from the statement that scores them
(``memories.retrieval.bm25_sql.scored_rows``): the same memories, scores and order as BM25's
ids, with the cosine distance, the served columns loaded and the search-only ones deferred,
and only the searching tenant's rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.models import UNSERVED_COLUMNS, Memory
from memories.retrieval.keyword import bm25, bm25_rows
from memories.retrieval.partition import layer_queryset, partition_is, partition_lexeme
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers

pytestmark = pytest.mark.django_db

USER = LayerIdentifiers(userId="u1")
TEXTS = ("Kayak trip to the lake", "Kayak lesson at the lake on Sunday", "Lake house rental",
         "Kayak repair kit", "Sunday brunch", "The lake froze in January")


def keyword_base(tenant: Any) -> tuple[Any, str]:
    lexeme = partition_lexeme(tenant.ctx.tenant_id, Layer.USER, USER)
    return layer_queryset(Layer.USER, USER).filter(partition_is(lexeme)), lexeme


def test_the_rows_are_bm25s_memories_in_its_order_with_their_cosine_distance(
        tenant_a: Any, tenant_b: Any) -> None:
    for text in TEXTS:
        tenant_a.add(text, metadata={"tags": ["water"]})
        tenant_b.add(text)  # the same words in another tenant
    vector = np.random.default_rng(3).normal(size=384).astype(np.float32)
    vector /= np.linalg.norm(vector)
    with tenant_scope(tenant_a.ctx):
        base, lexeme = keyword_base(tenant_a)
        scored = bm25(base, "kayak on the lake", 4, partition_lexeme=lexeme)
        with CaptureQueriesContext(connection) as captured:
            rows = bm25_rows(base, "kayak on the lake", 4, vector, partition_lexeme=lexeme)
        stored = dict(Memory.objects.values_list("pk", "embedding"))
    assert len(scored) == 4
    assert [(m.pk, m.keyword_score) for m in rows] == scored  # type: ignore[attr-defined]
    assert all(m.tenant_id == tenant_a.tenant.id for m in rows)
    for memory in rows:
        cosine = float(np.dot(vector, stored[memory.pk]) / np.linalg.norm(stored[memory.pk]))
        assert abs(float(memory.distance) - (1.0 - cosine)) < 1e-5  # type: ignore[attr-defined]
        assert memory.metadata["tags"] == ["water"] and memory.content in TEXTS
        assert set(UNSERVED_COLUMNS) <= memory.get_deferred_fields()
    # the rows come with the scores: no second query reads them by id
    assert not any('"memories_memory"."id" IN' in q["sql"] for q in captured.captured_queries)


def test_without_a_vector_no_distance_and_nothing_for_a_query_of_unknown_words(
        tenant_a: Any) -> None:
    for text in TEXTS:
        tenant_a.add(text)
    with tenant_scope(tenant_a.ctx):
        base, lexeme = keyword_base(tenant_a)
        rows = bm25_rows(base, "sunday", 10, None, partition_lexeme=lexeme)
        assert bm25_rows(base, "zebra xylophone", 10, None, partition_lexeme=lexeme) == []
    assert sorted(m.content for m in rows) == sorted(t for t in TEXTS if "Sunday" in t)
    assert not any(hasattr(m, "distance") for m in rows)
