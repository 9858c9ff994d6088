"""Row-level security helpers for migrations, and the app role's grants.

Policy on every tenant-owned table (lock 1)::

    tenant_id = (SELECT NULLIF(current_setting('app.tenant_id', true), '')::uuid)
    OR (SELECT pg_has_role(current_user, 'memory_platform', 'MEMBER'))

The second line is the platform staff's escape hatch (``tenants.context.
dangerously_cross_tenant``): a role, which the application's own role is not a member of,
instead of a setting any session may change (migration ``tenants.0005``; until then it was
``current_setting('app.cross_tenant')``).

With no tenant set, ``NULLIF`` yields NULL, the comparison is never true, and every table
reads 0 rows. ``FORCE`` makes the policy apply to the table owner as well.

Each setting is read in a scalar sub-select, which PostgreSQL plans as an InitPlan: read once
per statement instead of once per row, which made keyword searches over many rows markedly
faster (migration ``memories.0009``; figures: ``docs/performance.md``, "Row-level
security"). ``current_setting`` is stable within a statement, so the
rows allowed are the same.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connections, migrations

POLICY_NAME = "tenant_isolation"
#: Tables the app role may only insert into and read (the audit log).
APPEND_ONLY_TABLES = ("governance_auditentry",)
#: Tables the app role may only insert into (the platform's security log: a prober must not
#: read what was recorded about it).
INSERT_ONLY_TABLES = ("governance_securityprobe",)
#: The platform's role (``memory_project.embedded.PLATFORM_ROLE``).
PLATFORM_ROLE = "memory_platform"
TENANT_PREDICATE = (
    "tenant_id = (SELECT NULLIF(current_setting('app.tenant_id', true), '')::uuid) "
    "OR (SELECT pg_has_role(current_user, 'memory_platform', 'MEMBER'))"
)
#: The predicate of the first migrations, evaluated per row (kept to reverse ``memories.0009``).
PER_ROW_TENANT_PREDICATE = (
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


def refresh_policy(table: str, extra_read_predicate: str = "",
                   previous_extra_read_predicate: str = "") -> migrations.RunSQL:
    """A migration operation re-stating ``table``'s tenant policy with the current
    :data:`TENANT_PREDICATE` (reversed to :data:`PER_ROW_TENANT_PREDICATE`).

    Args:
        table: the table name.
        extra_read_predicate: OR-ed into the read side, as in :func:`enable_rls`.
        previous_extra_read_predicate: the read-side extra the reverse restores.
    """
    def alter(tenant: str, extra: str) -> str:
        using = tenant + (f" OR ({extra})" if extra else "")
        return f'ALTER POLICY {POLICY_NAME} ON "{table}" USING ({using}) WITH CHECK ({tenant})'

    return migrations.RunSQL(
        sql=[alter(TENANT_PREDICATE, extra_read_predicate)],
        reverse_sql=[alter(PER_ROW_TENANT_PREDICATE, previous_extra_read_predicate)],
    )


def grant_app_role(using: str = "default", **_: Any) -> None:
    """``post_migrate``: give the app role DML (never ownership, never TRUNCATE) on all tables,
    and the platform role the same wherever it exists.

    The app role may then not: change or delete audit entries; read the security log; change
    a tenant's row beyond its settings and configuration version (name, slug, activation
    belong to platform staff) or delete it. Runs after ``migrate --database owner``; does
    nothing when the app and owner roles are the same role (a single-URL deployment).
    """
    app_role = settings.DATABASES["default"].get("USER")
    owner_role = connections[using].settings_dict.get("USER")
    if not app_role or app_role == owner_role:
        return
    with connections[using].cursor() as cursor:
        roles = [f'"{app_role}"']
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [PLATFORM_ROLE])
        if cursor.fetchone():
            roles.append(PLATFORM_ROLE)
        for role in roles:
            cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public "
                           f"TO {role}")
            cursor.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}")
        existing = _existing(cursor, (*APPEND_ONLY_TABLES, *INSERT_ONLY_TABLES, "tenants_tenant"))
        for table in APPEND_ONLY_TABLES:
            if table in existing:
                cursor.execute(f'REVOKE UPDATE, DELETE ON "{table}" FROM "{app_role}"')
        for table in INSERT_ONLY_TABLES:
            if table in existing:
                cursor.execute(f'REVOKE SELECT, UPDATE, DELETE ON "{table}" FROM "{app_role}"')
        if "tenants_tenant" in existing:
            cursor.execute(f'REVOKE UPDATE, DELETE ON tenants_tenant FROM "{app_role}"')
            cursor.execute(f'GRANT UPDATE (settings, config_version) ON tenants_tenant '
                           f'TO "{app_role}"')


def _existing(cursor: Any, tables: tuple[str, ...]) -> set[str]:
    cursor.execute("SELECT table_name FROM information_schema.tables "
                   "WHERE table_schema = 'public' AND table_name = ANY(%s)", [list(tables)])
    return {row[0] for row in cursor.fetchall()}
