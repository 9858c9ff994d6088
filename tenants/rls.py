"""Row-level security helpers for migrations, and the app role's grants.

Policy on every tenant-owned table (lock 1)::

    tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::uuid
    OR current_setting('app.cross_tenant', true) = 'on'

With no tenant set, ``NULLIF`` yields NULL, the comparison is never true, and every table
reads 0 rows. ``FORCE`` makes the policy apply to the table owner as well.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connections, migrations

POLICY_NAME = "tenant_isolation"
#: Tables the app role may only insert into and read (the audit log).
APPEND_ONLY_TABLES = ("governance_auditentry",)
TENANT_PREDICATE = (
    "tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::uuid "
    "OR current_setting('app.cross_tenant', true) = 'on'"
)


def enable_rls(table: str, extra_read_predicate: str = "") -> migrations.RunSQL:
    """A migration operation enabling and forcing RLS with the tenant policy on ``table``.

    Args:
        table: the table name.
        extra_read_predicate: an SQL predicate OR-ed into the read (``USING``) side only;
            writes are always checked against the tenant alone.
    """
    using = TENANT_PREDICATE + (f" OR ({extra_read_predicate})" if extra_read_predicate else "")
    return migrations.RunSQL(
        sql=[
            f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY',
            f'ALTER TABLE "{table}" FORCE ROW LEVEL SECURITY',
            f'CREATE POLICY {POLICY_NAME} ON "{table}" USING ({using}) '
            f"WITH CHECK ({TENANT_PREDICATE})",
        ],
        reverse_sql=[
            f'DROP POLICY IF EXISTS {POLICY_NAME} ON "{table}"',
            f'ALTER TABLE "{table}" NO FORCE ROW LEVEL SECURITY',
            f'ALTER TABLE "{table}" DISABLE ROW LEVEL SECURITY',
        ],
    )


def grant_app_role(using: str = "default", **_: Any) -> None:
    """``post_migrate``: give the app role DML (never ownership, never TRUNCATE) on all tables.

    Runs after ``migrate --database owner``; does nothing when the app and owner roles are
    the same role (a single-URL deployment).
    """
    app_role = settings.DATABASES["default"].get("USER")
    owner_role = connections[using].settings_dict.get("USER")
    if not app_role or app_role == owner_role:
        return
    with connections[using].cursor() as cursor:
        cursor.execute(
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{app_role}"'
        )
        cursor.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{app_role}"')
        for table in APPEND_ONLY_TABLES:
            cursor.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_name = %s", [table]
            )
            if cursor.fetchone():
                cursor.execute(f'REVOKE UPDATE, DELETE ON "{table}" FROM "{app_role}"')
