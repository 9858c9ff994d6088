"""The platform admins' tenant switcher (``/console/switch/``) and the console frame every
page shares: the skip link, the favicon, the tenant navigation."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.console_helpers import console_user, platform_admin


def _root() -> Client:
    client = Client()
    client.force_login(platform_admin())
    return client


def test_a_platform_admin_switches_tenant_and_keeps_the_page(tenant_a: Any,
                                                             tenant_b: Any) -> None:
    root = _root()
    page = root.get(f"/console/t/{tenant_a.tenant.slug}/audit/").content.decode()
    assert 'id="tenant-switcher"' in page
    assert f'<option value="{tenant_b.tenant.slug}"' in page
    assert f'<option value="{tenant_a.tenant.slug}" selected>' in page
    assert '<input type="hidden" name="page" value="audit">' in page
    moved = root.get("/console/switch/", {"tenant": tenant_b.tenant.slug, "page": "audit"})
    assert (moved.status_code, moved["Location"]) == (
        302, f"/console/t/{tenant_b.tenant.slug}/audit/")
    unknown_page = root.get("/console/switch/", {"tenant": tenant_b.tenant.slug,
                                                 "page": "../../admin"})
    assert unknown_page["Location"] == f"/console/t/{tenant_b.tenant.slug}/"


@pytest.mark.django_db(transaction=True, databases=["default", "owner", "platform"])
def test_an_unknown_or_inactive_tenant_gets_the_consoles_404(owner_flushes: None,
                                                             tenant_a: Any) -> None:
    root = _root()
    gone = root.post(f"/console/tenants/{tenant_a.tenant.slug}/active/", {"active": "off"})
    assert gone.status_code == 302
    for slug in ("no-such-tenant", tenant_a.tenant.slug, "x" * 500):
        response = root.get("/console/switch/", {"tenant": slug})
        assert response.status_code == 404
        assert response.templates[0].name == "console/not_found.html"


def test_members_have_no_switcher_and_may_not_switch(tenant_a: Any, tenant_b: Any) -> None:
    for role in ("admin", "reviewer"):
        client = Client()
        client.force_login(console_user(tenant_a, f"member-{role}", role))
        first = "reviews/" if role == "reviewer" else ""
        page = client.get(f"/console/t/{tenant_a.tenant.slug}/{first}")
        assert page.status_code == 200
        assert 'id="tenant-switcher"' not in page.content.decode()
        refused = client.get("/console/switch/", {"tenant": tenant_b.tenant.slug})
        assert refused.status_code == 403
        assert refused.templates[0].name == "console/forbidden.html"
    assert Client().get("/console/switch/")["Location"].startswith("/console/login/")


def test_every_page_has_the_skip_link_favicon_and_marks_the_current_tab(
        tenant_a: Any, admin: Client) -> None:
    page = admin.get(f"/console/t/{tenant_a.tenant.slug}/policies/").content.decode()
    assert page.index('class="skip-link" href="#content"') < page.index("<header")
    assert '<main id="content"' in page
    assert 'rel="icon" href="/static/console/favicon.svg"' in page
    assert ('class="active"><a aria-current="page" href="/console/t/'
            f'{tenant_a.tenant.slug}/policies/">Policies</a>') in page
    assert page.count('aria-current="page"') == 2  # the tab and the breadcrumb
