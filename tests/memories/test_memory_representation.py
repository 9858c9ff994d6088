"""The one-pass rendering of a memory equals DRF's field-by-field rendering."""

from __future__ import annotations

from typing import Any

import pytest

from memories.api.serializers.memories import MemorySerializer, MemoryWithEmbeddingSerializer
from memories.api.serializers.representation import iso_datetime
from memories.models import Memory
from tests.retrieval_helpers import days_ago, reload, set_fields

pytestmark = pytest.mark.django_db


def assert_same_rendering(memory: Memory) -> None:
    serializer = MemorySerializer()
    fast, reference = serializer.to_representation(memory), serializer.field_representation(
        memory)
    assert list(fast) == list(reference) == MemorySerializer.Meta.fields
    # effectiveConfidence decays between the two calls when decay_rate > 0
    assert fast.pop("effectiveConfidence") == pytest.approx(
        reference.pop("effectiveConfidence"), rel=1e-6)
    assert fast == reference
    assert [type(v) for v in fast.values()] == [type(v) for v in reference.values()]


def test_a_fresh_memory_renders_as_drf_renders_it(tenant_a: Any) -> None:
    memory = reload(tenant_a, tenant_a.add("User likes green tea",
                                           metadata={"tags": ["tea"], "n": 3}))
    assert memory.task_id is None
    assert_same_rendering(memory)


def test_every_optional_part_set_renders_as_drf_renders_it(tenant_a: Any) -> None:
    memory = tenant_a.add("User keeps an inhaler in the car", layer="project",
                          identifiers={"projectId": "p1", "teamId": "t1"},
                          importance=0.9, confidence=0.7, decay_rate=0.05, task_id="task-42",
                          metadata={"source": {"type": "conversation"}, "nested": {"a": [1, None]}})
    set_fields(tenant_a, memory, last_confirmed_at=days_ago(3), last_referenced_at=days_ago(2),
               last_accessed_at=days_ago(1), reference_count=4, access_count=5,
               deleted_at=days_ago(0.5), pruned_at=days_ago(0.25), restored_at=days_ago(0.1),
               feedback_count=3, reward_sum=-1.5, sensitive=True, private=True,
               state="deleted", base_importance=None, context="the turn before")
    reloaded = reload(tenant_a, memory)
    assert_same_rendering(reloaded)
    assert MemorySerializer().to_representation(reloaded)["taskId"] == "task-42"


def test_the_embedding_variant_adds_the_embedding(tenant_a: Any) -> None:
    memory = reload(tenant_a, tenant_a.add("User runs on Sundays"))
    data = MemoryWithEmbeddingSerializer(memory).data
    assert list(data) == MemoryWithEmbeddingSerializer.Meta.fields
    assert len(data["embedding"]) == 384 and all(isinstance(x, float) for x in data["embedding"])


def test_datetimes_render_in_utc_with_a_z() -> None:
    assert iso_datetime(None) is None
    text = iso_datetime(days_ago(1))
    assert text is not None and text.endswith("Z") and "+" not in text
