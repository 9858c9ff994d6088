"""``manage.py graph_backfill --tenant T [--force]``: extract the knowledge graph of memories
stored before the graph existed (or whose content changed since), with a progress bar."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from graph.services import graph_backfill
from memory_project.errors import MemoryServiceError
from tenants.entry import tenant_job
from tenants.management.commands.create_api_key import find_tenant


class Command(BaseCommand):
    help = "Extract entities and relations of a tenant's memories the graph does not hold yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug, name or id")
        parser.add_argument("--force", action="store_true",
                            help="extract every memory again, also those already in the graph")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = find_tenant(options["tenant"])
        with tenant_job(tenant, "graph-backfill") as ctx, tqdm(
                desc="graph backfill", unit="memory", file=self.stderr._out) as bar:

            def progress(done: int, pending: int) -> None:
                bar.total = pending
                bar.update(done)

            try:
                done = graph_backfill(ctx, progress=progress, force=options["force"])
            except MemoryServiceError as err:
                raise CommandError(err.message) from None
        self.stdout.write(f"memories extracted: {done['memories']} of {done['pending']} pending; "
                          f"entity mentions: {done['entities']}; relations: {done['relations']}")
