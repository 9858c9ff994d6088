"""Invalidation of the L1 caches (``memories.tiers.l1``): a row trigger sends
``NOTIFY memory_l1, '<tenant id>:<memory id>'`` when an entry's columns change or the row is
deleted. PostgreSQL delivers notifications at commit only (never for a rolled-back write) and
folds identical ones of one transaction into one. Counters, importance and timestamps that are
not part of an entry (``reference_count``, ``access_count``, ``importance``, ...) send nothing,
so reads that count references do not empty the caches.

The SQL is frozen here as literals.
"""

from django.db import migrations

FORWARD = """
CREATE FUNCTION memory_l1_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('memory_l1', OLD.tenant_id::text || ':' || OLD.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_l1_update AFTER UPDATE ON memories_memory FOR EACH ROW
WHEN (OLD.content IS DISTINCT FROM NEW.content
      OR OLD.metadata IS DISTINCT FROM NEW.metadata
      OR OLD.embedding IS DISTINCT FROM NEW.embedding
      OR OLD.task_id IS DISTINCT FROM NEW.task_id
      OR OLD.session_id IS DISTINCT FROM NEW.session_id
      OR OLD.confidence IS DISTINCT FROM NEW.confidence
      OR OLD.decay_rate IS DISTINCT FROM NEW.decay_rate
      OR OLD.last_confirmed_at IS DISTINCT FROM NEW.last_confirmed_at
      OR OLD.state IS DISTINCT FROM NEW.state
      OR OLD.version IS DISTINCT FROM NEW.version
      OR OLD.kind IS DISTINCT FROM NEW.kind
      OR OLD.scope IS DISTINCT FROM NEW.scope
      OR OLD.layer IS DISTINCT FROM NEW.layer
      OR OLD.pruned_at IS DISTINCT FROM NEW.pruned_at)
EXECUTE FUNCTION memory_l1_notify();

CREATE TRIGGER memory_l1_delete AFTER DELETE ON memories_memory FOR EACH ROW
EXECUTE FUNCTION memory_l1_notify();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS memory_l1_delete ON memories_memory;
DROP TRIGGER IF EXISTS memory_l1_update ON memories_memory;
DROP FUNCTION IF EXISTS memory_l1_notify();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("memories", "0015_memory_task_id"),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
