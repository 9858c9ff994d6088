# The audit log and the security log, moved from the governance app (governance.0004) with
# their tables unchanged: only Django's state is created here, no SQL runs.

import django.db.models.deletion
import uuid6
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0005_platform_role'),
        ('governance', '0004_audit_log_moves_to_tenants'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='AuditEntry',
                    fields=[
                        ('id', models.UUIDField(default=uuid6.uuid7, editable=False, primary_key=True, serialize=False)),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('actor', models.CharField(max_length=200)),
                        ('action', models.CharField(db_index=True, max_length=64)),
                        ('target_type', models.CharField(blank=True, max_length=64)),
                        ('target_id', models.CharField(blank=True, max_length=255)),
                        ('details', models.JSONField(blank=True, default=dict)),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.tenant')),
                    ],
                    options={
                        'verbose_name_plural': 'audit log',
                        'ordering': ['-created_at'],
                        'db_table': 'governance_auditentry',
                    },
                ),
                migrations.CreateModel(
                    name='SecurityProbe',
                    fields=[
                        ('id', models.UUIDField(default=uuid6.uuid7, editable=False, primary_key=True, serialize=False)),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('prober_tenant_id', models.UUIDField(db_index=True)),
                        ('actor', models.CharField(max_length=200)),
                        ('target_type', models.CharField(max_length=64)),
                        ('target_id', models.UUIDField()),
                        ('cross_tenant', models.BooleanField(db_index=True, null=True)),
                    ],
                    options={
                        'ordering': ['-created_at'],
                        'db_table': 'governance_securityprobe',
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
