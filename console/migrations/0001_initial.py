# The SQL is frozen as literals: what this migration runs must not change when
# tenants.rls changes later.
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models



class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('tenants', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ConsoleMembership',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('admin', 'tenant admin'), ('reviewer', 'reviewer')], max_length=16)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.tenant')),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='console_membership', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.RunSQL(
            sql=[
                'ALTER TABLE "console_consolemembership" ENABLE ROW LEVEL SECURITY',
                'ALTER TABLE "console_consolemembership" FORCE ROW LEVEL SECURITY',
                'CREATE POLICY tenant_isolation ON "console_consolemembership" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')) OR (user_id = NULLIF(current_setting(\'app.console_user_id\', true), \'\')::bigint)) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'DROP POLICY IF EXISTS tenant_isolation ON "console_consolemembership"',
                'ALTER TABLE "console_consolemembership" NO FORCE ROW LEVEL SECURITY',
                'ALTER TABLE "console_consolemembership" DISABLE ROW LEVEL SECURITY',
            ],
        ),
    ]
