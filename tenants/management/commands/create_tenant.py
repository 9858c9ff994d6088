"""``manage.py create_tenant NAME [--slug S]``: create a tenant and print its first API key."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_project.errors import MemoryServiceError
from tenants import services
from tenants.entry import tenant_job


class Command(BaseCommand):
    help = "Create a tenant (company) and print a new API key for it (shown only once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--slug", default=None, help="companyId; derived from NAME if unset")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tenant = services.tenant_create(name=options["name"], slug=options["slug"])
        except MemoryServiceError as err:
            raise CommandError(err.message) from None
        with tenant_job(tenant, "create_tenant") as ctx:
            _, raw_key = services.api_key_create(ctx, name="initial")
        self.stdout.write(f"tenant: {tenant.name} (slug/companyId: {tenant.slug}, id: {tenant.id})")
        self.stdout.write(f"api key (shown once): {raw_key}")
