"""``manage.py demo_tenant``: create the demo tenant (``DEMO_TENANT_NAME``) once and print
its API key; does nothing when the name is empty or the tenant exists (``run_stack`` calls
it before serving)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from tenants import services
from tenants.entry import tenant_job
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Create the demo tenant (DEMO_TENANT_NAME) unless it exists, and print its API key."

    def handle(self, *args: Any, **options: Any) -> None:
        name = settings.DEMO_TENANT_NAME
        if not name or Tenant.objects.filter(slug=name).exists():
            return
        tenant = services.tenant_create(name=name, slug=name)
        with tenant_job(tenant, "run_stack") as ctx:
            _, raw_key = services.api_key_create(ctx, name="demo")
        bar = "=" * 72
        self.stdout.write(
            f"{bar}\nDemo tenant {name!r} created. Its API key (shown only this once):\n\n"
            f"    {raw_key}\n\n"
            f"    export MEMORY_API_KEY={raw_key}\n{bar}"
        )
