# The SQL is frozen as literals: what this migration runs must not change when
# tenants.rls changes later.
"""Row-level security policies read their settings once per statement (InitPlan), not per
row; see ``tenants.rls``."""

from django.db import migrations


API_KEY_PREFIX = "prefix = NULLIF(current_setting('app.api_key_prefix', true), '')"
CONSOLE_USER = "user_id = NULLIF(current_setting('app.console_user_id', true), '')::bigint"

TABLES = (
    "memories_memory", "memories_memoryhistory", "memories_memoryfeedback",
    "memories_closedsession", "governance_policy", "governance_auditentry",
    "governance_reviewitem", "tenants_organization", "tenants_team", "tenants_project",
)


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0008_fillfactor"),
        ("tenants", "0002_api_key_restrictions"),
        ("governance", "0001_initial"),
        ("console", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "memories_memory" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "memories_memory" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "memories_memoryhistory" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "memories_memoryhistory" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "memories_memoryfeedback" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "memories_memoryfeedback" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "memories_closedsession" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "memories_closedsession" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "governance_policy" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "governance_policy" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "governance_auditentry" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "governance_auditentry" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "governance_reviewitem" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "governance_reviewitem" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "tenants_organization" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "tenants_organization" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "tenants_team" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "tenants_team" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "tenants_project" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "tenants_project" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\') WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "tenants_apikey" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')) OR (prefix = (SELECT NULLIF(current_setting(\'app.api_key_prefix\', true), \'\')))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "tenants_apikey" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\' OR (prefix = NULLIF(current_setting(\'app.api_key_prefix\', true), \'\'))) WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
        migrations.RunSQL(
            sql=[
                'ALTER POLICY tenant_isolation ON "console_consolemembership" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')) OR (user_id = (SELECT NULLIF(current_setting(\'app.console_user_id\', true), \'\')::bigint))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'ALTER POLICY tenant_isolation ON "console_consolemembership" USING (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\' OR (user_id = NULLIF(current_setting(\'app.console_user_id\', true), \'\')::bigint)) WITH CHECK (tenant_id = NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid OR current_setting(\'app.cross_tenant\', true) = \'on\')',
            ],
        ),
    ]
