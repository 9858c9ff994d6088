"""``manage.py create_console_user USERNAME --tenant SLUG --role admin|reviewer``."""

from __future__ import annotations

import getpass
import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.services import console_member_set
from memory_project.errors import InvalidInput
from tenants.entry import tenant_job
from tenants.management.commands.create_api_key import find_tenant


class Command(BaseCommand):
    help = ("Create (or update) a console user for one tenant: a tenant admin or a reviewer. "
            "Platform admins are superusers (manage.py createsuperuser).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--tenant", required=True, help="slug, name or id")
        parser.add_argument("--role", choices=["admin", "reviewer"], default="admin")
        parser.add_argument("--password", default=None,
                            help="default: asked for (or the CONSOLE_PASSWORD variable)")
        parser.add_argument("--email", default="")

    def handle(self, *args: Any, **options: Any) -> None:

        tenant = find_tenant(options["tenant"])
        password = options["password"] or os.environ.get("CONSOLE_PASSWORD")
        users = get_user_model()
        user = users.objects.filter(username=options["username"]).first()
        if user is None:
            if not password:
                password = getpass.getpass("Password: ")
            if not password:
                raise CommandError("A new user needs a password.")
            user = users.objects.create_user(options["username"], options["email"], password)
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
        with tenant_job(tenant, "create_console_user") as ctx:
            try:
                console_member_set(ctx, user=user, role=options["role"])
            except InvalidInput as err:
                raise CommandError(err.message) from None
        self.stdout.write(f"{user.get_username()}: {options['role']} of {tenant.slug}; sign in at "
                          "/console/")
