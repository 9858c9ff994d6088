"""``manage.py summaries_generate --tenant T [--layer L] [--force]``: summarise every layer
scope of a tenant that has no summary yet (all of them with ``--force``), with a progress
bar; then the time per summary."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory_project.errors import MemoryServiceError
from summaries.services import summaries_backfill
from tenants.entry import tenant_job
from tenants.layers import Layer
from tenants.management.commands.create_api_key import find_tenant


class Command(BaseCommand):
    help = "Generate the layer summaries of a tenant's scopes that have none yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug, name or id")
        parser.add_argument("--layer", choices=[x.value for x in Layer],
                            help="only this layer's scopes")
        parser.add_argument("--force", action="store_true",
                            help="regenerate every scope, also those already summarised")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = find_tenant(options["tenant"])
        started = time.perf_counter()
        with tenant_job(tenant, "summaries-backfill") as ctx, tqdm(
                desc="summaries", unit="scope", file=self.stderr._out) as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.n = done
                bar.refresh()

            try:
                done = summaries_backfill(ctx, layer=options["layer"], force=options["force"],
                                          progress=progress)
            except MemoryServiceError as err:
                raise CommandError(err.message) from None
        seconds = time.perf_counter() - started
        per = seconds / done["summaries"] if done["summaries"] else 0.0
        self.stdout.write(f"scopes summarised: {done['generated']} of {done['scopes']}; "
                          f"summaries written: {done['summaries']}; {seconds:.1f} s "
                          f"({per:.2f} s per summary)")
