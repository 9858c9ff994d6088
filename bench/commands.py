"""What the LoCoMo commands share: the tenant they write to and the file they read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from bench.locomo import load_samples
from memory_project.errors import MemoryServiceError
from tenants.context import TenantContext
from tenants.management.commands.create_api_key import find_tenant
from tenants.models import Tenant
from tenants.services import system_context


def locomo_input(tenant: str, path: Path, principal: str
                 ) -> tuple[Tenant, TenantContext, list[dict[str, Any]]]:
    """The tenant named ``tenant`` (slug, name or id), a context acting as
    ``system:<principal>`` in it, and the conversations of the LoCoMo file ``path``.

    Raises:
        CommandError: no such tenant, or the file is missing or not LoCoMo's format.
    """
    found = find_tenant(tenant)
    try:
        samples = load_samples(path)
    except MemoryServiceError as err:
        raise CommandError(err.message) from None
    return found, system_context(found, principal), samples
