"""A new ``config_version`` whenever an API key changes (its last use aside) and when the
tenant is deactivated or renamed: ``tenants.key_cache`` serves a key only under the version
it was read with."""

from django.db import migrations

from tenants.migrations import _config_touch as touch

#: The key's columns whose change must reach every process's key cache (not last_used_at).
KEY_COLUMNS = ("tenant_id", "prefix", "key_hash", "roles", "expires_at", "revoked_at",
               "allowed_layers", "pinned_identifiers", "rate_limit")


class Migration(migrations.Migration):
    dependencies = [("tenants", "0003_config_version")]

    operations = [
        migrations.RunSQL(
            'CREATE TRIGGER config_touch AFTER INSERT OR DELETE OR UPDATE OF '
            f'{", ".join(KEY_COLUMNS)} ON tenants_apikey '
            "FOR EACH ROW EXECUTE FUNCTION tenant_config_touch()",
            "DROP TRIGGER IF EXISTS config_touch ON tenants_apikey",
        ),
        migrations.RunSQL(touch.tenant_row_function(("settings", "is_active", "slug")),
                          touch.tenant_row_function(("settings",))),
    ]
