"""Review items stop keeping the raw content of a refused write (their preview, PII redacted
and denied matches masked, is what approving stores): drop it from existing items."""

from django.db import migrations

DROP_CONTENT = """
SELECT set_config('app.cross_tenant', 'on', true);
UPDATE governance_reviewitem SET details = details - 'content' WHERE details ? 'content';
SELECT set_config('app.cross_tenant', '', true);
"""


class Migration(migrations.Migration):
    dependencies = [("governance", "0001_initial")]

    operations = [migrations.RunSQL(DROP_CONTENT, migrations.RunSQL.noop)]
