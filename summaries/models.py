"""Layer summaries (seed 001 "Layer Summary Storage", "Context Vector Storage"): per layer
scope — one layer and the identifiers that scope it, e.g. ``project`` / ``projectId=p1`` —
a row of bookkeeping (:class:`SummaryScope`: change counter, pending regeneration, last
error) and one :class:`LayerSummary` per depth. Both tables are tenant-owned under
row-level security.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from pgvector.django import VectorField
from uuid6 import uuid7

from tenants.layers import Layer
from tenants.managers import TenantOwnedModel

#: Dimensions of ``context_vector``: the memories' embedding model (all-MiniLM-L6-v2).
CONTEXT_VECTOR_DIMENSIONS = 384


class Depth(models.TextChoices):
    """Summary depths and their target lengths in tokens (seed 001: sentence ~50, paragraph
    ~200, detailed ~500)."""

    SENTENCE = "sentence"
    PARAGRAPH = "paragraph"
    DETAILED = "detailed"


class Priority(models.IntegerChoices):
    """How soon a pending regeneration runs: ``HIGH`` at once (a cited source was deleted or
    replaced: seed 001 "Immediate invalidation"), ``NORMAL`` after the batch window."""

    HIGH = 0
    NORMAL = 1


class SummaryScope(TenantOwnedModel):
    """One layer scope whose memories are summarised, and when to summarise it again.

    ``scope_key`` is the layer's required identifiers in the matrix's order
    (``projectId=p1``; ``agentId=a1&userId=u1``); ``personal_key`` is ``""`` for the shared
    summary, ``userId=…`` or ``sessionId=…`` for a personalized one (seed 001 "Store
    personalized summary"). ``changes`` counts memory changes since the last generation
    (seed 001 "Configure change-based update"); ``pending_since`` is set while a
    regeneration waits (batched within the window unless ``priority`` is high).
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    layer = models.CharField(max_length=16, choices=[(x.value, x.value) for x in Layer])
    scope_key = models.CharField(max_length=600)
    identifiers = models.JSONField(default=dict)
    personal_key = models.CharField(max_length=300, blank=True, default="")
    changes = models.PositiveIntegerField(default=0)
    first_change_at = models.DateTimeField(null=True, blank=True)
    pending_since = models.DateTimeField(null=True, blank=True)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices,
                                                default=Priority.NORMAL)
    trigger = models.CharField(max_length=16, blank=True, default="")
    last_generated_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["tenant", "layer", "scope_key", "personal_key"], name="summary_scope_uniq")]
        indexes = [models.Index(fields=["tenant", "pending_since"], name="summary_pending_idx")]

    def __str__(self) -> str:
        personal = f" for {self.personal_key}" if self.personal_key else ""
        return f"{self.layer} {self.scope_key}{personal}"


class LayerSummary(TenantOwnedModel):
    """One summary of a layer scope at one depth.

    ``sentences`` is ``[{"text": …, "sourceIds": [memory id, …]}]``: every sentence with the
    memories it rests on; ``source_ids`` is their union (GIN-indexed, so a deleted or
    replaced source finds the summaries that cite it). ``token_count`` is counted with
    ``summaries.tokens``. ``source_hash`` is the SHA-256 of the scope's sources when it was
    written (``summaries.scopes.source_hash``). ``invalidated_at`` is set when a cited
    source was deleted or replaced: the summary is stale until regenerated.
    ``context_vector`` is the embedding of ``content`` (seed 001 "Context Vector Storage").
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    scope = models.ForeignKey(SummaryScope, on_delete=models.CASCADE, related_name="summaries")
    layer = models.CharField(max_length=16, choices=[(x.value, x.value) for x in Layer])
    depth = models.CharField(max_length=16, choices=Depth.choices)
    content = models.TextField()
    sentences = models.JSONField(default=list)
    source_ids = ArrayField(models.UUIDField(), default=list)
    source_count = models.PositiveIntegerField(default=0)
    token_count = models.PositiveIntegerField(default=0)
    source_hash = models.CharField(max_length=64)
    generated_at = models.DateTimeField()
    model = models.CharField(max_length=200)
    personalized = models.BooleanField(default=False)
    personalization_context = models.JSONField(default=dict, blank=True)
    trigger = models.CharField(max_length=16)
    invalidated_at = models.DateTimeField(null=True, blank=True)
    context_vector = VectorField(dimensions=CONTEXT_VECTOR_DIMENSIONS, null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "depth"],
                                               name="summary_scope_depth_uniq")]
        indexes = [GinIndex(fields=["source_ids"], name="summary_sources_gin"),
                   models.Index(fields=["tenant", "layer"], name="summary_layer_idx")]

    def __str__(self) -> str:
        return f"{self.layer} {self.depth} summary"
