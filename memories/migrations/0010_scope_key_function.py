"""``memory_scope_key(...) → tsvector``: one lexeme naming a memory's layer scope.

``'s' || sha256(tenant || layer || the identifiers the layer requires)`` in hex, fields
separated by ``chr(31)`` (seed 001 "Layer Requirements Matrix"; SHA-256 rather than MD5, which
PostgreSQL refuses on FIPS-mode builds); ``memories.scoping.scope_lexeme`` computes
the same in Python. A lexeme only narrows an index scan: queries keep their column filters,
so two scopes sharing a lexeme would cost time, never leak rows. IMMUTABLE, so a generated
column may use it.
"""

from __future__ import annotations

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION memory_scope_key(
    tenant uuid, layer text, agent text, usr text, sess text, project text, team text,
    org text, company text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_to_tsvector(ARRAY['s' || encode(sha256(convert_to(
        tenant::text || chr(31) || layer || chr(31) ||
        coalesce(CASE layer
            WHEN 'agent' THEN agent || chr(31) || usr
            WHEN 'user' THEN usr
            WHEN 'session' THEN usr || chr(31) || sess
            WHEN 'project' THEN project
            WHEN 'team' THEN team
            WHEN 'org' THEN org
            WHEN 'company' THEN company
        END, ''), 'UTF8')), 'hex')])
$$
"""

SIGNATURE = "memory_scope_key(uuid, text, text, text, text, text, text, text, text)"


class Migration(migrations.Migration):
    dependencies = [("memories", "0009_rls_initplan")]

    operations = [
        migrations.RunSQL(FUNCTION, f"DROP FUNCTION IF EXISTS {SIGNATURE}"),
    ]
