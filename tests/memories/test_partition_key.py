"""``scope_key``: the lexeme PostgreSQL stores per memory (``memory_scope_key``) equals the one
Python computes for the same layer scope (``partition.partition_lexeme``), for every layer, and
differs between scopes and tenants."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from memories.models import Memory
from memories.retrieval.partition import keyword_partition, partition_lexeme, resolve_identifiers
from memories.services.memory import MemoryInput, memory_bulk_add
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers

pytestmark = pytest.mark.django_db

IDS = {"agentId": "a1", "userId": "u1", "sessionId": "s1", "projectId": "p1", "teamId": "t1",
       "orgId": "o1"}
OTHER = {"agentId": "a2", "userId": "u2", "sessionId": "s2", "projectId": "p2",
         "teamId": "t2", "orgId": "o2"}


def add_everywhere(tenant: Any, ids: dict[str, str], label: str) -> None:
    identifiers = LayerIdentifiers.from_mapping(ids)
    with tenant_scope(tenant.ctx):
        memory_bulk_add(tenant.ctx, items=[
            MemoryInput(content=f"{label} note in the {layer.value} layer", layer=layer.value,
                        identifiers=identifiers) for layer in Layer])


@pytest.mark.parametrize("layer", list(Layer), ids=lambda layer: layer.value)
def test_the_stored_lexeme_is_the_one_python_computes(tenant_a, tenant_b, layer) -> None:
    add_everywhere(tenant_a, IDS, "mine")
    add_everywhere(tenant_a, OTHER, "other")
    add_everywhere(tenant_b, IDS, "foreign")
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        ids = resolve_identifiers(tenant_a.ctx, LayerIdentifiers.from_mapping(IDS))
        stored = Memory.objects.get(layer=layer.value, content__startswith="mine")
        assert str(stored.scope_key) == f"'{partition_lexeme(tenant_a.ctx.tenant_id, layer, ids)}'"
        found = sorted(Memory.objects.filter(keyword_partition(tenant_a.ctx.tenant_id, layer, ids))
                       .values_list("content", flat=True))
    # One company per tenant: both sets of identifiers share the company layer's scope.
    shared = ["other"] if layer is Layer.COMPANY else []
    assert found == sorted(f"{label} note in the {layer.value} layer"
                           for label in ["mine", *shared])


def test_it_follows_a_memory_moved_to_another_scope(tenant_a) -> None:
    add_everywhere(tenant_a, IDS, "mine")
    with transaction.atomic(), tenant_scope(tenant_a.ctx):
        ids = resolve_identifiers(tenant_a.ctx, LayerIdentifiers.from_mapping(OTHER))
        Memory.objects.filter(layer="user").update(user_id="u2")
        moved = list(Memory.objects.filter(
            keyword_partition(tenant_a.ctx.tenant_id, Layer.USER, ids))
                     .values_list("content", flat=True))
    assert moved == ["mine note in the user layer"]
