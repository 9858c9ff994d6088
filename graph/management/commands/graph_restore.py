"""``manage.py graph_restore --tenant T --at 2026-11-26T06:00:00+00:00``: point-in-time
restore of a tenant's knowledge graph from the newest backup taken at or before ``--at``
(logged and audited with the row counts before and after)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from graph.maintenance import graph_restore
from memory_project.errors import MemoryServiceError
from tenants.entry import tenant_job
from tenants.management.commands.create_api_key import find_tenant


class Command(BaseCommand):
    help = "Restore a tenant's graph from the newest backup at or before a time."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug, name or id")
        parser.add_argument("--at", required=True, help="ISO-8601 time with a timezone")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            at = datetime.fromisoformat(options["at"])
        except ValueError:
            raise CommandError("--at must be an ISO-8601 time, e.g. 2026-11-26T06:00:00+00:00"
                               ) from None
        tenant = find_tenant(options["tenant"])
        try:
            with tenant_job(tenant, "graph-restore") as ctx:
                report = graph_restore(ctx, at=at)
        except MemoryServiceError as err:
            raise CommandError(err.message) from None
        self.stdout.write(json.dumps(report, indent=2, default=str))
