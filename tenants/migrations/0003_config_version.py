"""``tenants_tenant.config_version``: a random UUID replaced in the writing transaction
whenever what ``tenants.config_cache`` caches changes (settings, policies, hierarchy)."""

import uuid

from django.db import migrations, models

from tenants.migrations import _config_touch as touch

#: Row trigger of the configuration tables: a new version for the row's tenant.
TOUCH_FUNCTION = """
CREATE OR REPLACE FUNCTION tenant_config_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tenants_tenant SET config_version = gen_random_uuid()
    WHERE id = CASE WHEN TG_OP = 'DELETE' THEN OLD.tenant_id ELSE NEW.tenant_id END;
    RETURN NULL;
END $$
"""

TABLES = ("governance_policy", "tenants_organization", "tenants_team", "tenants_project")


def _touch_trigger(table: str) -> migrations.RunSQL:
    return migrations.RunSQL(
        f'CREATE TRIGGER config_touch AFTER INSERT OR UPDATE OR DELETE ON "{table}" '
        "FOR EACH ROW EXECUTE FUNCTION tenant_config_touch()",
        f'DROP TRIGGER IF EXISTS config_touch ON "{table}"',
    )


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0002_api_key_restrictions"),
        ("governance", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="config_version",
            field=models.UUIDField(default=uuid.uuid4, editable=False),
        ),
        migrations.RunSQL(TOUCH_FUNCTION, "DROP FUNCTION IF EXISTS tenant_config_touch()"),
        migrations.RunSQL(touch.tenant_row_function(("settings",)),
                          "DROP FUNCTION IF EXISTS tenant_settings_touch()"),
        *(_touch_trigger(table) for table in TABLES),
        migrations.RunSQL(
            "CREATE TRIGGER config_touch BEFORE UPDATE ON tenants_tenant "
            "FOR EACH ROW EXECUTE FUNCTION tenant_settings_touch()",
            "DROP TRIGGER IF EXISTS config_touch ON tenants_tenant",
        ),
    ]
