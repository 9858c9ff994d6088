# The audit log and the security log belong to the tenants app from here on. Their tables
# (governance_auditentry, governance_securityprobe) stay as they are, with their row-level
# security and grants: this migration changes only Django's state (tenants.0006 adds them).

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('governance', '0003_security_probe'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='AuditEntry'),
                migrations.DeleteModel(name='SecurityProbe'),
            ],
            database_operations=[],
        ),
    ]
