"""Row-level security policies read their settings once per statement (InitPlan), not per
row; see ``tenants.rls``."""

from django.db import migrations

from tenants.rls import refresh_policy

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
        *(refresh_policy(table) for table in TABLES),
        refresh_policy(
            "tenants_apikey",
            extra_read_predicate=(
                "prefix = (SELECT NULLIF(current_setting('app.api_key_prefix', true), ''))"),
            previous_extra_read_predicate=API_KEY_PREFIX,
        ),
        refresh_policy(
            "console_consolemembership",
            extra_read_predicate=(
                "user_id = (SELECT NULLIF(current_setting('app.console_user_id', true), '')"
                "::bigint)"),
            previous_extra_read_predicate=CONSOLE_USER,
        ),
    ]
