"""The hierarchy endpoints (``/api/v1/orgs``, ``/teams``, ``/projects``) under the tenant API
contract; their behaviour is tested in ``tests/memories/test_memories_api.py`` and
``tests/memory_project/test_bad_input.py``."""

from __future__ import annotations

from tests.contract import TenantApiContract


class TestHierarchyApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for orgs, teams and projects."""

    operations = tuple(f"{level}.{op}" for level in ("org", "team", "project")
                       for op in ("list", "get", "create", "delete"))
