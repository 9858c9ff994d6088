"""Sign-in and browser security (security review, finding 7): a brute-force limit on the
console and admin sign-in, short sessions, Secure cookies and HSTS over HTTPS, a content
security policy, and pages that no cache may keep."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tests.console_helpers import PASSWORD, console_user, platform_admin

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@pytest.mark.parametrize("login_url", ["/console/login/", "/admin/login/"])
def test_five_wrong_passwords_lock_the_account_even_for_the_right_one(
        tenant_a: Any, login_url: str) -> None:
    if login_url.startswith("/admin"):
        platform_admin("alice")
    else:
        console_user(tenant_a, "alice", "admin")
    client = Client()
    for _ in range(5):
        response = client.post(login_url, {"username": "alice", "password": "wrong"})
        assert "_auth_user_id" not in client.session
    response = client.post(login_url, {"username": "alice", "password": PASSWORD})
    assert "_auth_user_id" not in client.session
    assert response.status_code == 429
    assert b"Too many failed sign-ins" in response.content


def test_the_lock_is_per_account(tenant_a: Any) -> None:
    console_user(tenant_a, "alice", "admin")
    console_user(tenant_a, "bob", "admin")
    client = Client()
    for _ in range(5):
        client.post("/console/login/", {"username": "alice", "password": "wrong"})
    client.post("/console/login/", {"username": "bob", "password": PASSWORD})
    assert "_auth_user_id" in client.session


def test_a_session_lasts_hours_not_weeks(settings: Any) -> None:
    assert settings.SESSION_COOKIE_AGE <= 12 * 3600


def test_cookies_are_secure_and_hsts_is_sent_over_https(tenant_a: Any) -> None:
    console_user(tenant_a, "alice", "admin")
    client = Client()
    response = client.post("/console/login/", {"username": "alice", "password": PASSWORD},
                           secure=True)
    assert response.cookies["sessionid"]["secure"] is True
    assert response.cookies["csrftoken"]["secure"] is True if "csrftoken" in response.cookies \
        else True
    assert response["Strict-Transport-Security"].startswith("max-age=")
    plain = Client().get("/console/login/")
    assert "Strict-Transport-Security" not in plain


def test_pages_carry_a_content_security_policy_without_inline_scripts(tenant_a: Any) -> None:
    response = Client().get("/console/login/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split(
        "script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in policy
    inline = [str(p) for p in TEMPLATES.rglob("*.html")
              if re.search(r"<script(?![^>]*\bsrc=)[^>]*>", p.read_text())]
    assert inline == []


def test_the_api_docs_need_no_network(db: Any) -> None:
    page = Client().get("/api/docs/")
    assert page.status_code == 200
    assert b"cdn." not in page.content and b"jsdelivr" not in page.content


def test_api_answers_and_the_new_key_page_are_not_cached(tenant_a: Any) -> None:
    response = tenant_a.client.get("/api/v1/settings")
    assert "no-store" in response["Cache-Control"]
    console_user(tenant_a, "alice", "admin")
    client = Client()
    client.login(username="alice", password=PASSWORD)
    slug = tenant_a.tenant.slug
    page = client.post(f"/console/t/{slug}/settings/keys/", {"name": "ci", "roles": ["reader"]})
    assert "no-store" in page["Cache-Control"]
