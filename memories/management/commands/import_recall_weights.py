"""``manage.py import_recall_weights FILE --tenant T [--scope S]``: recall weights from TOML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.services.settings import settings_update, weights_from_toml
from memory_project.errors import MemoryServiceError
from tenants.entry import tenant_job
from tenants.management.commands.create_api_key import find_tenant
from tenants.services import system_context


class Command(BaseCommand):
    help = "Import recall score weights (butler.toml form) into a tenant's settings."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--tenant", required=True, help="tenant slug, name or id")
        parser.add_argument("--scope", default=None,
                            help="scope of a top-level score_weights (default: 'default')")

    def handle(self, *args: Any, **options: Any) -> None:
        ctx = system_context(find_tenant(options["tenant"]), "import_recall_weights")
        try:
            text = options["file"].read_text(encoding="utf-8")
        except OSError as err:
            raise CommandError(f"Cannot read {options['file']}: {err}") from None
        try:
            weights = weights_from_toml(text, scope=options["scope"])
            with tenant_job(ctx):
                settings_update(ctx, patch={"recall": {"scoreWeights": weights}})
        except MemoryServiceError as err:
            raise CommandError(err.message) from None
        for scope, values in weights.items():
            parts = ", ".join(f"{k}={v}" for k, v in values.items())
            self.stdout.write(f"scope {scope}: {parts}")
