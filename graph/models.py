"""The graph keeps no Django models: its tables live in DuckDB (``graph.schema``), outside
PostgreSQL, behind the tenant query layer (``graph.tenant_sql``)."""
