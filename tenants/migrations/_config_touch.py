"""SQL shared by the ``config_version`` migrations (a module, not a migration)."""

from __future__ import annotations


def tenant_row_function(columns: tuple[str, ...]) -> str:
    """``tenant_settings_touch()``: the tenant row's BEFORE UPDATE trigger function, giving
    the row a new ``config_version`` when any of ``columns`` changes."""
    changed = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in columns)
    return f"""
CREATE OR REPLACE FUNCTION tenant_settings_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF {changed} THEN
        NEW.config_version := gen_random_uuid();
    END IF;
    RETURN NEW;
END $$
"""
