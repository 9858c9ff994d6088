"""``manage.py reembed [--tenant T] [--batch-size N]``: queue re-embedding after a model change."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memories.services.reembed import reembed_enqueue
from tenants.entry import tenant_job
from tenants.management.commands.create_api_key import find_tenant
from tenants.models import Tenant


class Command(BaseCommand):
    help = ("Queue memories.memory_reembed jobs for every memory whose vector came from "
            "another model than the current EMBEDDING_PROVIDER's (all active tenants, or one).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", default=None, help="tenant slug, name or id")
        parser.add_argument("--batch-size", type=int, default=100,
                            help="memories per job (default 100)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        tenants = ([find_tenant(options["tenant"])] if options["tenant"]
                   else list(Tenant.objects.filter(is_active=True).order_by("slug")))
        total_memories = total_jobs = 0
        for tenant in tqdm(tenants, desc="tenants", unit="tenant", file=self.stderr._out,
                           disable=len(tenants) < 2):
            with tenant_job(tenant, "reembed") as ctx:
                memories, jobs = reembed_enqueue(ctx, batch_size=options["batch_size"])
            if memories:
                self.stdout.write(f"{tenant.slug}: {memories} memories in {jobs} jobs")
            total_memories += memories
            total_jobs += jobs
        self.stdout.write(f"queued {total_memories} memories in {total_jobs} jobs")
