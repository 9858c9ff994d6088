"""Lock 1: row-level security on every tenant-owned table, proven as the app role."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import DatabaseError, connection, transaction

from memories.models import Memory
from memory_project.errors import MissingTenantContext
from tenants.context import tenant_scope
from tenants.managers import TenantOwnedModel
from tenants.models import ApiKey

pytestmark = pytest.mark.django_db


def tenant_tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT c.table_name FROM information_schema.columns c
               JOIN information_schema.tables t USING (table_schema, table_name)
               WHERE c.table_schema = 'public' AND c.column_name = 'tenant_id'
                 AND t.table_type = 'BASE TABLE' ORDER BY 1"""
        )
        return [row[0] for row in cursor.fetchall()]


def test_it_lists_every_tenant_owned_model_among_tenant_tables() -> None:
    models = {
        m._meta.db_table for m in apps.get_models() if issubclass(m, TenantOwnedModel)
    }
    assert models, "no tenant-owned models found"
    assert models <= set(tenant_tables())


def test_it_enables_and_forces_rls_with_a_policy_on_every_tenant_table() -> None:
    tables = tenant_tables()
    assert {"memories_memory", "tenants_apikey", "tenants_project"} <= set(tables)
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(
                """SELECT c.relrowsecurity, c.relforcerowsecurity,
                          (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid),
                          a.attnotnull
                   FROM pg_class c JOIN pg_attribute a
                     ON a.attrelid = c.oid AND a.attname = 'tenant_id'
                   WHERE c.relname = %s AND c.relnamespace = 'public'::regnamespace""",
                [table],
            )
            rls, force, policies, not_null = cursor.fetchone()
            assert (rls, force, not_null) == (True, True, True), table
            assert policies >= 1, table


def test_every_policy_reads_its_settings_once_per_statement() -> None:
    """A bare ``current_setting`` in a policy is evaluated for every row scanned; a scalar
    sub-select becomes an InitPlan, read once (``tenants.rls``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, qual, with_check FROM pg_policies WHERE schemaname = 'public'")
        policies = cursor.fetchall()
    assert {row[0] for row in policies} >= set(tenant_tables())
    for table, using, check in policies:
        for predicate in (using, check):
            reads = predicate.split("current_setting(")[:-1]
            assert reads, (table, predicate)
            for before in reads:
                opening = before.rstrip("( ").removesuffix("NULLIF").rstrip("( ")
                assert opening.endswith("SELECT"), (table, predicate)


def test_it_connects_as_a_role_that_is_not_superuser_owner_or_bypassrls() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )
        assert cursor.fetchone() == (False, False)
        cursor.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
            "AND tableowner = current_user"
        )
        assert cursor.fetchone()[0] == 0


def test_it_reads_zero_rows_from_every_tenant_table_with_no_tenant_set(
    tenant_a, tenant_b
) -> None:
    tenant_a.add("Acme uses PostgreSQL")
    tenant_b.add("Globex uses MySQL")
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.count() == 1
        assert ApiKey.objects.count() == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('app.tenant_id', '', true)")
        for table in tenant_tables():
            cursor.execute(f'SELECT count(*) FROM "{table}"')
            assert cursor.fetchone()[0] == 0, table


def test_it_shows_each_tenant_only_its_own_rows_through_raw_sql(tenant_a, tenant_b) -> None:
    tenant_a.add("Acme fact")
    tenant_b.add("Globex fact")
    with tenant_scope(tenant_b.ctx), connection.cursor() as cursor:
        cursor.execute("SELECT content FROM memories_memory")
        assert [r[0] for r in cursor.fetchall()] == ["Globex fact"]


def test_it_refuses_to_write_a_row_for_another_tenant(tenant_a, tenant_b) -> None:
    memory = tenant_a.add("Acme fact")
    with (
        tenant_scope(tenant_b.ctx),
        pytest.raises(DatabaseError),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO tenants_organization (id, tenant_id, external_id, name, created_at)"
            " VALUES (gen_random_uuid(), %s, 'x', '', now())",
            [str(tenant_a.tenant.id)],
        )
    with tenant_scope(tenant_a.ctx):
        assert Memory.objects.get(pk=memory.pk).content == "Acme fact"


def test_it_fails_closed_in_the_manager_without_a_tenant(tenant_a) -> None:
    with pytest.raises(MissingTenantContext):
        list(Memory.objects.all())
    with pytest.raises(MissingTenantContext):
        ApiKey.objects.count()


def test_it_refuses_all_tenants_queries_outside_the_escape_hatch(tenant_a) -> None:
    with pytest.raises(PermissionError):
        Memory.objects.dangerously_all_tenants()


def test_it_refuses_to_move_a_row_to_another_tenant(tenant_a, tenant_b) -> None:
    memory = tenant_a.add("Acme fact")
    with (
        tenant_scope(tenant_a.ctx),
        pytest.raises(DatabaseError),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE memories_memory SET tenant_id = %s WHERE id = %s",
            [str(tenant_b.tenant.id), str(memory.pk)],
        )
