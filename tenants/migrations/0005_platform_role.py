"""The escape hatch of row-level security becomes a role: every tenant policy lets members of
``memory_platform`` read and write every tenant's rows, instead of any session that sets
``app.cross_tenant`` (which the application's own role could do to itself). The SQL is
written out in full: a later change of ``tenants.rls`` must not change this migration."""

from django.db import migrations

REQUIRE_ROLE = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memory_platform') THEN
        RAISE EXCEPTION 'The role memory_platform does not exist. Create it first: '
            'CREATE ROLE memory_platform LOGIN NOSUPERUSER NOBYPASSRLS (README "Running '
            'against real PostgreSQL and Redis").';
    END IF;
END $$;
"""

TENANT = "tenant_id = (SELECT NULLIF(current_setting('app.tenant_id', true), '')::uuid)"
ROLE = "(SELECT pg_has_role(current_user, 'memory_platform', 'MEMBER'))"
SETTING = "(SELECT current_setting('app.cross_tenant', true)) = 'on'"

#: table → extra read-only predicate (the side doors of key lookup and console sign-in).
TABLES = {
    "memories_memory": "",
    "memories_memoryhistory": "",
    "memories_memoryfeedback": "",
    "memories_closedsession": "",
    "memories_termimpact": "",
    "governance_policy": "",
    "governance_auditentry": "",
    "governance_reviewitem": "",
    "tenants_organization": "",
    "tenants_team": "",
    "tenants_project": "",
    "jobs_queuedjob": "",
    "tenants_apikey":
        "prefix = (SELECT NULLIF(current_setting('app.api_key_prefix', true), ''))",
    "console_consolemembership":
        "user_id = (SELECT NULLIF(current_setting('app.console_user_id', true), '')::bigint)",
}


def _alter(table: str, extra: str, escape: str) -> str:
    check = f"{TENANT} OR {escape}"
    using = check + (f" OR ({extra})" if extra else "")
    return f'ALTER POLICY tenant_isolation ON "{table}" USING ({using}) WITH CHECK ({check})'


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0004_api_key_config_touch"),
        ("memories", "0013_memory_autovacuum"),
        ("governance", "0002_review_items_without_content"),
        ("jobs", "0001_initial"),
        ("console", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(REQUIRE_ROLE, migrations.RunSQL.noop),
        migrations.RunSQL(
            [_alter(table, extra, ROLE) for table, extra in TABLES.items()],
            [_alter(table, extra, SETTING) for table, extra in TABLES.items()],
        ),
    ]
