"""The lifecycle section of ``PATCH /api/v1/settings``: validated, merged, then used."""

from __future__ import annotations

import pytest

from memories.services.lifecycle import lifecycle_settings
from memories.services.lifecycle_config import lifecycle_section
from tenants.context import tenant_scope
from tests.contract import TenantApiContract
from tests.helpers import assert_error

pytestmark = pytest.mark.django_db
URL = "/api/v1/settings"


def test_it_stores_lifecycle_settings_that_the_jobs_then_read(tenant_a) -> None:
    patch = {"lifecycle": {"decay": {"enabled": True, "ratePerDay": 0.05},
                           "sessionCleanup": {"retentionPeriod": "2d", "promotionThreshold": 0.6},
                           "promotionTargetLayer": "team", "deletedRetentionDays": 10}}
    response = tenant_a.client.patch(URL, patch, format="json")
    assert response.status_code == 200, response.content
    with tenant_scope(tenant_a.ctx):
        assert lifecycle_section(tenant_a.ctx, "decay")["ratePerDay"] == 0.05
        cleanup = lifecycle_settings(tenant_a.ctx)["sessionCleanup"]
        assert cleanup["promotionThreshold"] == 0.6
        assert cleanup["autoDelete"] is False  # the seed default stays
    assert tenant_a.client.get(URL).json()["lifecycle"]["promotionTargetLayer"] == "team"


@pytest.mark.parametrize("lifecycle", [
    {"decay": {"ratePerDay": 2}},
    {"decay": {"speed": 1}},
    {"decay": "fast"},
    {"sessionCleanup": {"retentionPeriod": "7 days"}},
    {"sessionCleanup": {"promotionThreshold": 1.5}},
    {"sessionCleanup": {"autoDelete": "yes"}},
    {"promotionTargetLayer": "session"},
    {"deletedRetentionDays": 0},
    {"unknown": 1},
])
def test_it_refuses_invalid_lifecycle_settings(tenant_a, lifecycle) -> None:
    before = tenant_a.client.get(URL).json()
    assert_error(tenant_a.client.patch(URL, {"lifecycle": lifecycle}, format="json"), 400,
                 "INVALID_INPUT")
    assert tenant_a.client.get(URL).json() == before


class TestSettingsApiContract(TenantApiContract):
    """The tenant API contract (``tests.contract``) for this module's endpoints."""

    operations = ('settings.get', 'settings.update',)
