"""``manage.py import_locomo FILE --tenant T``: every turn of every conversation as a memory.

Each conversation becomes a project (``projectId`` = ``sample_id``), each turn a
project-layer memory added through the same service as the API, in embedding batches.
Re-running adds nothing twice: turns already stored (by ``dia_id``) are skipped. The
embedding model runs on every core (``--threads``): the command has nothing else to serve.
Once imported, the memory table is analyzed again if the tenant outgrew the planner's
statistics (``memories.services.planner_statistics``), so that its first searches are
planned for its size, not the minute later the periodic job would.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from bench.commands import locomo_input
from bench.locomo import turns
from memories.embedding.threads import use_threads
from memories.models import Kind, Memory
from memories.services.memory import MemoryInput, memory_bulk_add
from memories.services.planner_statistics import statistics_refresh
from tenants.context import TenantContext
from tenants.entry import tenant_job
from tenants.layers import LayerIdentifiers
from tenants.services import project_get_or_create


class Command(BaseCommand):
    help = "Import a LoCoMo-format file: one project per conversation, one memory per turn."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--tenant", required=True, help="tenant slug, name or id")
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument(
            "--threads", type=int, default=os.cpu_count() or 1,
            help="cores the embedding model uses: batches embedded at once (default: every "
                 "core; web workers use EMBEDDING_PARALLEL_BATCHES)")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant, ctx, samples = locomo_input(options["tenant"], options["file"], "import_locomo")
        if options["threads"] < 1:
            raise CommandError("--threads must be at least 1.")
        with use_threads(options["threads"]):
            added, skipped = self._import(ctx, samples, max(1, options["batch_size"]))
        self.stdout.write(
            f"imported {added} turns from {len(samples)} conversations "
            f"into tenant {tenant.slug}; {skipped} already present"
        )
        if added:
            run = statistics_refresh()
            if run.analyzed:
                self.stdout.write(f"planner statistics of the memory table refreshed in "
                                  f"{run.seconds:.1f} s ({len(run.stale)} tenant(s) outgrew them)")

    def _import(self, ctx: TenantContext, samples: list[dict[str, Any]], batch_size: int
                ) -> tuple[int, int]:
        """Store every turn not stored yet; ``(added, skipped)``."""
        added = skipped = 0
        for sample in samples:
            sample_id = str(sample["sample_id"])
            with tenant_job(ctx):
                project_get_or_create(ctx, external_id=sample_id, name=f"LoCoMo {sample_id}")
                stored = set(
                    Memory.objects.filter(layer="project", project_id=sample_id)
                    .exclude(metadata__diaId=None)
                    .values_list("metadata__diaId", flat=True)
                )
            pending = [t for t in turns(sample) if t.dia_id not in stored]
            skipped += sum(1 for _ in turns(sample)) - len(pending)
            identifiers = LayerIdentifiers(projectId=sample_id)
            bar = tqdm(total=len(pending), desc=sample_id, unit="turn", file=self.stderr._out)
            for start in range(0, len(pending), batch_size):
                batch = pending[start : start + batch_size]
                items = [
                    MemoryInput(content=t.content, layer="project", identifiers=identifiers,
                                metadata=t.metadata(), context=t.context, kind=Kind.EPISODE,
                                occurred_at=t.occurred_at)
                    for t in batch
                ]
                with tenant_job(ctx):
                    memory_bulk_add(ctx, items=items)
                added += len(batch)
                bar.update(len(batch))
            bar.close()
        return added, skipped
