"""``manage.py vector_copy --tenant T --source A --target B``: copy a tenant's vectors from one
backend to another, then verify counts and a sample of neighbours."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory_project.errors import MemoryServiceError
from tenants.entry import tenant_job
from tenants.management.commands.create_api_key import find_tenant
from tenants.services import system_context
from vectors.config import BACKENDS, load_config
from vectors.errors import InvalidBackendConfig
from vectors.registry import build
from vectors.runner import call
from vectors.services import vectors_copy, vectors_verify


class Command(BaseCommand):
    help = ("Copy one tenant's vectors from one vector backend to another (settings of both "
            "from the environment or MEMORY_CONFIG_FILE), then check that the target holds "
            "every vector and that a sample finds the same 10 nearest neighbours in both. "
            "Exits non-zero when the check fails. Safe to run again: writes are upserts.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug, name or id")
        parser.add_argument("--source", required=True, choices=list(BACKENDS))
        parser.add_argument("--target", required=True, choices=list(BACKENDS))
        parser.add_argument("--batch", type=int, default=500, help="vectors per page (500)")
        parser.add_argument("--sample", type=int, default=20,
                            help="vectors whose neighbours are compared (20)")
        parser.add_argument("--min-overlap", type=float, default=0.9,
                            help="lowest mean top-10 overlap that passes (0.9)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["source"] == options["target"]:
            raise CommandError("--source and --target must differ.")
        if not 1 <= options["batch"] <= 1000:
            raise CommandError("--batch must be within 1..1000.")
        tenant = find_tenant(options["tenant"])
        tenant_id = str(tenant.id)
        try:
            source = build(load_config(backend=options["source"]))
            target = build(load_config(backend=options["target"]))
        except InvalidBackendConfig as exc:
            raise CommandError(str(exc)) from exc
        ctx = system_context(tenant, "vector_copy")
        try:
            with tenant_job(ctx), tqdm(desc="vectors", unit="vector",
                                         file=self.stderr._out) as progress:
                copied = vectors_copy(tenant_id=tenant_id, source=source, target=target,
                                      batch=options["batch"], on_progress=progress.update)
                check = vectors_verify(tenant_id=tenant_id, source=source, target=target,
                                       ids=copied.ids, sample=options["sample"],
                                       min_overlap=options["min_overlap"])
        except MemoryServiceError as exc:
            raise CommandError(f"{exc.code}: {exc.message} {exc.details}") from exc
        finally:
            for backend in (source, target):
                call(backend.close)
        self.stdout.write(
            f"{tenant.slug}: {copied.seen} vectors read from {source.name}, {copied.written} "
            f"written to {target.name}; target holds {check.found}/{check.copied}; "
            f"top-10 neighbour overlap {check.overlap:.3f} over {check.sampled} samples")
        if not check.ok:
            raise CommandError(
                f"verification failed: {check.found}/{check.copied} vectors in the target, "
                f"overlap {check.overlap:.3f} (at least {options['min_overlap']} needed)")
        self.stdout.write("verified")
