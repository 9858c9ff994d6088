"""``manage.py create_api_key TENANT [--name N] [--expires-days D] [--role R]
[--layer L ...] [--identifier NAME=VALUE ...] [--rate-limit N]``: print a new API key."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from memory_project.errors import MemoryServiceError
from tenants import services
from tenants.entry import tenant_job
from tenants.models import Tenant
from tenants.permissions import Role
from tenants.selectors import tenant_by_ref


def find_tenant(ref: str) -> Tenant:
    """The tenant whose slug, name or id is ``ref``.

    Raises:
        CommandError: no such tenant.
    """
    tenant = tenant_by_ref(ref)
    if tenant is None:
        raise CommandError(f"No tenant {ref!r} (give its slug, name or id).")
    return tenant


class Command(BaseCommand):
    help = "Create an API key for a tenant and print it (it is shown only once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="slug, name or id")
        parser.add_argument("--name", default="")
        parser.add_argument("--expires-days", type=int, default=None)
        parser.add_argument("--role", action="append", dest="roles",
                            choices=[role.value for role in Role],
                            help="repeatable; default admin. writer: add, update, soft "
                                 "delete; reviewer: read + the review queue; reader: read "
                                 "only (README: Roles and permissions)")
        parser.add_argument("--layer", action="append", dest="layers", default=[],
                            help="repeatable; restrict the key to these layers")
        parser.add_argument("--identifier", action="append", dest="pins", default=[],
                            metavar="NAME=VALUE",
                            help="repeatable; bind the key to an identifier, e.g. userId=u1")
        parser.add_argument("--rate-limit", type=int, default=None,
                            help="requests per rate-limit window (default: RATE_LIMIT_REQUESTS)")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = find_tenant(options["tenant"])
        expires = options["expires_days"]
        expires_at = timezone.now() + timedelta(days=expires) if expires else None
        pins: dict[str, str] = {}
        for pin in options["pins"]:
            name, sep, value = pin.partition("=")
            if not sep:
                raise CommandError(f"--identifier {pin!r}: expected NAME=VALUE, e.g. userId=u1")
            pins[name.strip()] = value.strip()
        ctx = services.system_context(tenant, "create_api_key")
        try:
            with tenant_job(ctx):
                key, raw_key = services.api_key_create(
                    ctx, name=options["name"], expires_at=expires_at, roles=options["roles"],
                    allowed_layers=options["layers"], pinned_identifiers=pins,
                    rate_limit=options["rate_limit"])
        except MemoryServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"api key for {tenant.slug} (prefix {key.prefix}, shown once): {raw_key}")
