"""A memory replaced by a newer one: the contradiction case of conversation ingestion ("I
moved to Berlin" after "I live in Paris").

The old memory is archived (it leaves search, recall and list, keeps its content and
history) and points at its replacement (``metadata.supersededBy``); the new one points back
(``metadata.supersedes``). :func:`superseded_chain` follows those links back in time, which
is what a search with ``includeSuperseded`` shows beside the current fact.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memories.models import HistoryAction, Memory, State
from memories.services.history import history_record, history_row
from memories.signals import memories_withdrawn
from tenants.audit import audit_record
from tenants.context import TenantContext

#: Links followed at most by :func:`superseded_chain`.
MAX_CHAIN = 10


@transaction.atomic
def memory_supersede(ctx: TenantContext, *, old: Memory, new: Memory) -> bool:
    """Archive ``old`` as superseded by ``new`` and link the two both ways.

    Returns ``False`` (changing nothing) when ``old`` is no longer active: another writer
    superseded, archived or deleted it first.
    """
    now = timezone.now().isoformat()
    locked = Memory.objects.select_for_update().filter(pk=old.pk, state=State.ACTIVE).first()
    if locked is None:
        return False
    old_metadata = dict(locked.metadata or {})
    locked.metadata = {**old_metadata, "supersededBy": str(new.pk), "supersededAt": now}
    locked.state = State.ARCHIVED
    locked.version = F("version") + 1
    locked.save(update_fields=["metadata", "state", "version", "updated_at"])
    memories_withdrawn.send(sender=Memory, tenant_id=ctx.tenant_id, memory_ids=[locked.pk])
    new_metadata = dict(new.metadata or {})
    new.metadata = {**new_metadata, "supersedes": str(old.pk)}
    Memory.objects.filter(pk=new.pk).update(metadata=new.metadata)
    history_record([
        history_row(ctx, locked.pk, HistoryAction.ARCHIVE, old_metadata=old_metadata,
                    new_metadata=locked.metadata,
                    details={"reason": "superseded", "supersededBy": str(new.pk)}),
        history_row(ctx, new.pk, HistoryAction.UPDATE, old_metadata=new_metadata,
                    new_metadata=new.metadata, details={"supersedes": str(old.pk)}),
    ])
    audit_record(ctx, action="memory_superseded", target_type="memory", target_id=locked.pk,
                 details={"supersededBy": str(new.pk)})
    return True


def superseded_chain(memory: Any) -> list[Memory]:
    """The memories ``memory`` replaced, newest first (at most :data:`MAX_CHAIN`), read in
    the caller's tenant scope. ``memory`` is a :class:`Memory` (or anything with
    ``metadata``)."""
    chain: list[Memory] = []
    seen: set[str] = set()
    link = (getattr(memory, "metadata", None) or {}).get("supersedes")
    while link and len(chain) < MAX_CHAIN and link not in seen:
        seen.add(str(link))
        try:
            previous = Memory.objects.filter(pk=uuid.UUID(str(link))).first()
        except ValueError:
            break
        if previous is None:
            break
        chain.append(previous)
        link = (previous.metadata or {}).get("supersedes")
    return chain
