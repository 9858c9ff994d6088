"""The memory entry of seed 001, with the fields retrieval and lifecycle work rely on."""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Func
from pgvector.django import HnswIndex, VectorField
from uuid6 import uuid7

from memories.restrictions import restriction_q
from tenants.context import require_context
from tenants.layers import Layer
from tenants.managers import TenantOwnedModel, TenantScopedManager

EMBEDDING_DIMENSIONS = 384  # all-MiniLM-L6-v2


class Kind(models.TextChoices):
    """What a memory is (seed 002): a fact, an episode or a rule."""

    FACT = "fact"
    EPISODE = "episode"
    RULE = "rule"


class State(models.TextChoices):
    """Lifecycle state (seed 001, "Memory Lifecycle")."""

    ACTIVE = "active"
    ARCHIVED = "archived"
    DELETED = "deleted"


class MemoryManager(TenantScopedManager["Memory"]):
    """The tenant-scoped manager, narrowed further to what a restricted API key may touch
    (``memories.restrictions.restriction_q``)."""

    def get_queryset(self) -> models.QuerySet[Memory]:
        queryset = super().get_queryset()
        q = restriction_q(require_context())
        return queryset if q is None else queryset.filter(q)


#: Memory columns for search only, never part of a memory as the API, console or admin shows
#: it: deferred wherever memories are loaded to be shown or ranked.
UNSERVED_COLUMNS = ("embedding", "search_vector", "term_frequencies", "scope_key")


class Memory(TenantOwnedModel):
    """One memory: content, layer and its identifiers, metadata, embedding, scoring fields.

    ``id`` is a UUIDv7, so ids sort by creation time. ``metadata`` holds seed 001's
    ``tags``, ``source``, ``knowledgePointer`` and any custom fields. ``version`` increases by
    one on every update (optimistic locking). ``importance``, ``confidence`` are in [0, 1];
    ``decay_rate`` is per day.

    Lifecycle (seed 001, "Memory Lifecycle"): ``state`` is active, archived (decayed or
    merged away) or deleted (soft delete, ``deleted_at``; purged after the tenant's retention).
    ``importance`` is recomputed from access frequency and recency on every access and update
    (seed 001 "Importance Scoring"); ``base_importance`` keeps the importance the caller gave
    (``NULL`` only for rows written outside the service: then ``importance`` is still it).
    ``pruned_at`` marks a memory pruned by negative feedback (seed 001 "Memory-R1 Pruning"):
    it leaves search, recall and list. ``feedback_count``/``reward_sum`` are the running
    reward since creation or the last restore; ``restored_at`` is the last restore.

    Seed 004's entry fields (``docs/storage-tiers.md``): ``TaskID`` is ``task_id``,
    ``SessionID`` ``session_id``, ``Strength`` the stored ``confidence`` (decayed by
    ``decay_rate`` since ``LastReview``), ``LastReview`` ``last_confirmed_at``.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    content = models.TextField()
    content_hash = models.CharField(max_length=64, db_index=False)
    layer = models.CharField(max_length=16, choices=[(x.value, x.value) for x in Layer])
    agent_id = models.CharField(max_length=255, null=True, blank=True)
    user_id = models.CharField(max_length=255, null=True, blank=True)
    session_id = models.CharField(max_length=255, null=True, blank=True)
    project_id = models.CharField(max_length=255, null=True, blank=True)
    team_id = models.CharField(max_length=255, null=True, blank=True)
    org_id = models.CharField(max_length=255, null=True, blank=True)
    company_id = models.CharField(max_length=255, null=True, blank=True)
    #: The task the memory was written for (seed 004 ``TaskID``): an exact-match filter of list
    #: and search, not a layer identifier (it changes neither the memory's layer nor whose
    #: memory it is). ``NULL`` when the writer named none.
    task_id = models.CharField(max_length=255, null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    embedding_model = models.CharField(max_length=100, default="all-MiniLM-L6-v2")
    #: Text around the memory that helps find it (e.g. the neighbouring turns of a conversation):
    #: indexed for keyword search at a lower weight, never returned as the memory's content.
    context = models.TextField(blank=True, default="")
    #: When what the memory records was said or happened, on its source's clock (a
    #: conversation turn's session time), as the writer gave it (``occurredAt``); ``NULL``
    #: when not given. ``created_at`` is when it was recorded here. Hybrid search matches a
    #: query's dates against it, else against ``created_at`` (``memories.retrieval.when``).
    occurred_at = models.DateTimeField(null=True, blank=True)
    #: English full-text vector kept by PostgreSQL (stemming: "running" → "run"); ``content``
    #: carries weight A, ``context`` weight D.
    search_vector = models.GeneratedField(
        expression=SearchVector("content", config="english", weight="A")
        + SearchVector("context", config="english", weight="D"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    #: ``{lexeme: term frequency}`` of ``search_vector`` for BM25, a ``context`` position
    #: counting 0.35 of a ``content`` one (SQL function ``memory_term_frequencies``, migration
    #: 0006): scoring reads a key instead of unnesting the vector (``docs/performance.md``).
    term_frequencies = models.GeneratedField(
        expression=Func(
            SearchVector("content", config="english", weight="A")
            + SearchVector("context", config="english", weight="D"),
            function="memory_term_frequencies", output_field=models.JSONField(),
        ),
        output_field=models.JSONField(),
        db_persist=True,
    )
    #: One lexeme naming the row's layer partition (the column's name predates the word): a
    #: SHA-256 of its tenant, layer and the identifiers the layer requires (SQL function
    #: ``memory_scope_key``, migration 0010; ``memories.retrieval.partition.partition_lexeme``).
    #: Indexed with ``search_vector`` in one GIN index, so a keyword query finds the memories
    #: of one partition holding a term in a single index scan.
    scope_key = models.GeneratedField(
        expression=Func(
            "tenant_id", "layer", "agent_id", "user_id", "session_id", "project_id", "team_id",
            "org_id", "company_id", function="memory_scope_key",
            output_field=SearchVectorField(),
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FACT)
    scope = models.CharField(max_length=100, default="global")
    importance = models.FloatField(default=0.5)
    confidence = models.FloatField(default=1.0)
    decay_rate = models.FloatField(default=0.0)
    last_confirmed_at = models.DateTimeField(null=True, blank=True)
    reference_count = models.PositiveIntegerField(default=0)
    last_referenced_at = models.DateTimeField(null=True, blank=True)
    access_count = models.PositiveIntegerField(default=0)
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    sensitive = models.BooleanField(default=False)
    private = models.BooleanField(default=False)
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    deleted_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    #: The caller's importance (seed 001 importance input), kept while ``importance`` moves.
    base_importance = models.FloatField(null=True, blank=True)
    pruned_at = models.DateTimeField(null=True, blank=True)
    restored_at = models.DateTimeField(null=True, blank=True)
    feedback_count = models.PositiveIntegerField(default=0, db_default=0)
    reward_sum = models.FloatField(default=0.0, db_default=0.0)

    objects: MemoryManager = MemoryManager()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "state", "deleted_at"], name="mem_state_deleted_idx"),
            models.Index(fields=["tenant", "layer", "user_id", "id"], name="mem_user_idx"),
            models.Index(fields=["tenant", "layer", "agent_id", "id"], name="mem_agent_idx"),
            models.Index(fields=["tenant", "layer", "session_id", "id"], name="mem_session_idx"),
            models.Index(fields=["tenant", "layer", "project_id", "id"], name="mem_project_idx"),
            models.Index(fields=["tenant", "layer", "team_id", "id"], name="mem_team_idx"),
            models.Index(fields=["tenant", "layer", "org_id", "id"], name="mem_org_idx"),
            models.Index(fields=["tenant", "layer", "company_id", "id"], name="mem_company_idx"),
            models.Index(fields=["tenant", "task_id", "id"], name="mem_task_idx",
                         condition=models.Q(task_id__isnull=False)),
            models.Index(fields=["tenant", "content_hash"], name="mem_hash_idx"),
            GinIndex(fields=["metadata"], name="mem_metadata_gin", opclasses=["jsonb_path_ops"]),
            GinIndex(fields=["search_vector", "scope_key"], name="mem_keyword_gin"),
            HnswIndex(
                name="mem_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(importance__gte=0, importance__lte=1), name="mem_importance_0_1"
            ),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0, confidence__lte=1), name="mem_confidence_0_1"
            ),
            models.CheckConstraint(
                condition=models.Q(decay_rate__gte=0), name="mem_decay_rate_ge0"
            ),
            models.CheckConstraint(
                condition=models.Q(base_importance__isnull=True)
                | models.Q(base_importance__gte=0, base_importance__lte=1),
                name="mem_base_importance_0_1",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.layer}: {self.content[:60]}"

    @property
    def identifiers(self) -> dict[str, str]:
        """The identifiers that are set, camelCase (seed 001 ``LayerIdentifiers``)."""
        pairs = {
            "agentId": self.agent_id, "userId": self.user_id, "sessionId": self.session_id,
            "projectId": self.project_id, "teamId": self.team_id, "orgId": self.org_id,
            "companyId": self.company_id,
        }
        return {k: v for k, v in pairs.items() if v is not None}


class TermImpact(TenantOwnedModel):
    """One posting of the keyword index: a lexeme of a memory's ``search_vector``, with its
    BM25 impact, kept by PostgreSQL (triggers of migrations 0012, 0014 and 0018) for the
    memories search can return (active, not pruned): a term's postings in a scope count its
    document frequency there (``keyword_stats._frequencies``).

    ``impact`` is BM25's term-frequency factor ``tf / (tf + k1·(1 − b + b·dl / L))`` for
    ``L = keyword.IMPACT_REFERENCE_LENGTH`` (30 lexemes): the memory's share of a term's weight,
    which orders a term's postings. ``scope`` is the 64-bit prefix of the memory's
    ``scope_key`` lexeme (``keyword.scope_hash``). A keyword query whose only selective term
    matches thousands of a scope's memories reads that term's best postings from the index
    ``termimpact_champions`` instead of every memory holding the term (``keyword.bm25``).
    Each such memory also has a document posting (lexeme ``partition.DOCUMENT_LEXEME``, ``''``,
    migration 0019) whose ``impact`` is its length in lexemes: a scope's size and mean length
    are then one index-only scan. Written only by the trigger; ``memory_id`` is a plain UUID
    (the trigger deletes the rows of a deleted memory).
    """

    pk = models.CompositePrimaryKey("memory_id", "lexeme")
    #: No index or foreign-key check of its own (~30 rows per memory): the memory's row has
    #: both, and ``termimpact_champions`` carries the tenant for row-level security.
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+",
                               db_index=False, db_constraint=False)
    memory_id = models.UUIDField()
    lexeme = models.TextField()
    scope = models.BigIntegerField()
    impact = models.FloatField()

    class Meta:
        indexes = [
            models.Index(fields=["scope", "lexeme", "-impact"], include=["memory_id", "tenant"],
                         name="termimpact_champions"),
        ]

    def __str__(self) -> str:
        return f"{self.lexeme} {self.memory_id}"


class ClosedSession(TenantOwnedModel):
    """A session that was closed (by its caller or by the idle-session job), with what its
    promotion evaluation did. Closing again returns this record."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    session_id = models.CharField(max_length=255)
    user_id = models.CharField(max_length=255)
    closed_at = models.DateTimeField(auto_now_add=True)
    closed_by = models.CharField(max_length=200, blank=True)
    result = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user_id", "session_id"],
                                    name="uniq_closed_session")
        ]


class HistoryAction(models.TextChoices):
    """What happened to a memory (one :class:`MemoryHistory` row each)."""

    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"
    RESTORE = "restore"
    ARCHIVE = "archive"
    PRUNE = "prune"
    MERGE = "merge"
    ERASE = "erase"


class MemoryHistory(TenantOwnedModel):
    """One change of one memory: who, when, what (old and new content and metadata).

    ``memory_id`` is a plain UUID, not a foreign key: the history outlives the memory (soft
    delete, hard erase). Erasure (right to erasure) blanks the four content columns of every
    row of the memory and sets ``erased_at``; action, actor and time stay. ``details`` never
    holds content (ids, counts, reasons only).
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    memory_id = models.UUIDField()
    action = models.CharField(max_length=16, choices=HistoryAction.choices)
    old_content = models.TextField(null=True, blank=True)
    new_content = models.TextField(null=True, blank=True)
    old_metadata = models.JSONField(null=True, blank=True)
    new_metadata = models.JSONField(null=True, blank=True)
    actor = models.CharField(max_length=200)
    details = models.JSONField(default=dict, blank=True)
    erased_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "memory history"
        indexes = [
            models.Index(fields=["tenant", "memory_id", "created_at"], name="memhist_memory_idx"),
            # the console dashboard's writes per hour/day of a range (console/dashboard.py)
            models.Index(fields=["tenant", "created_at"], name="memhist_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.memory_id}"


class MemoryFeedback(TenantOwnedModel):
    """One reward for one memory's contribution to a task outcome (seed 001 "Memory-R1
    Pruning"): ``reward`` in [-1, 1], the optional ``query`` it was used for."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="feedback")
    reward = models.FloatField()
    query = models.TextField(blank=True, default="")
    actor = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(reward__gte=-1, reward__lte=1), name="memfb_reward_range"
            ),
        ]
