"""Where a query goes: the ``platform`` connection inside ``dangerously_cross_tenant``.

Cross-tenant access is a database role (``memory_platform``) that the application's own role
is not a member of (``memory_project.embedded``): inside the escape hatch, every ORM query
of the block runs on the ``platform`` connection, logged in as that role; everywhere else on
``default``, where row-level security confines it to the tenant in scope.
"""

from __future__ import annotations

from typing import Any

from tenants.context import cross_tenant_reason

PLATFORM = "platform"


class PlatformRouter:
    """Django database router: ``platform`` while a cross-tenant block is open."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return PLATFORM if cross_tenant_reason() else None

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return PLATFORM if cross_tenant_reason() else None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        return True  # one database; the aliases are roles on it

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == PLATFORM else None
