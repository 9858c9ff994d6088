"""Console users managed in the console: platform admins on ``/console/users/`` (every tenant's
users; create, change role or tenant, deactivate, remove the membership), tenant admins on
their Settings page (their own tenant's members only), every change audited in the tenant it
affects. The key list's statuses: ``test_console_key_status.py``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from console.access import membership_of
from console.models import ConsoleMembership
from tenants.context import tenant_scope
from tenants.models import AuditEntry
from tests.console_helpers import PASSWORD, audit_actions, console_user, platform_admin

pytestmark = pytest.mark.django_db

#: The platform admins' list reads memberships through the platform connection, which sees
#: committed rows only: those tests run in transactions of their own.
CROSS_TENANT = pytest.mark.django_db(transaction=True,
                                     databases=["default", "owner", "platform"])
NEW_PASSWORD = "kettle-orbit-meadow-42"
MISSING_USER = 987654
#: Prefixes of the audit actions of console users and memberships.
CONSOLE_ACTIONS = ("console_user_", "console_member_")


def text(response: Any) -> str:
    return response.content.decode()


def row(response: Any, row_id: str) -> str:
    """The HTML of the table row ``<tr id="row_id">`` of the page."""
    found = re.search(rf'<tr id="{re.escape(row_id)}">(.*?)</tr>', text(response), re.S)
    assert found, f"no row {row_id}"
    return found.group(1)


def user(username: str) -> Any:
    return get_user_model().objects.get(username=username)


def membership(username: str) -> ConsoleMembership | None:
    """``username``'s membership, read the way sign-in reads it."""
    with transaction.atomic():
        return membership_of(user(username))


def member(username: str) -> ConsoleMembership:
    found = membership(username)
    assert found is not None, f"{username} has no membership"
    return found


def audit_details(tenant: Any, action: str) -> list[dict[str, Any]]:
    with tenant_scope(tenant.ctx):
        return list(AuditEntry.objects.filter(action=action).order_by("created_at", "id")
                    .values_list("details", flat=True))


def signed_in(account: Any) -> Client:
    client = Client()
    client.force_login(account)
    return client


@pytest.fixture
def root(owner_flushes: None) -> Client:
    """A platform admin (``root``), signed in; transactional tests flush as the owner."""
    return signed_in(platform_admin())


# --- platform admins: /console/users/ --------------------------------------------------------


@CROSS_TENANT
def test_it_lists_every_console_user_with_tenant_and_role(root: Client, tenant_a: Any,
                                                          tenant_b: Any) -> None:
    console_user(tenant_a, "alice", "admin")
    console_user(tenant_b, "bob", "reviewer")
    assert 'href="/console/users/"' in text(root.get("/console/"))
    page = root.get("/console/users/")
    assert page.status_code == 200
    alice, bob, me = row(page, "user-alice"), row(page, "user-bob"), row(page, "user-root")
    assert '<td class="tenant">Acme</td>' in alice and "tenant admin" in alice
    assert '<td class="tenant">Globex</td>' in bob and '<td class="role">reviewer</td>' in bob
    assert '<td class="platform-admin">yes</td>' in me and "cannot demote" in me
    assert "only active admin of Acme" in alice  # the confirm texts warn
    assert "only active admin" not in bob


@CROSS_TENANT
def test_it_creates_a_reviewer_who_lands_on_the_tenants_review_queue(
        root: Client, tenant_a: Any) -> None:
    created = root.post("/console/users/new/", {
        "username": "rita", "email": "rita@example.com", "password": NEW_PASSWORD,
        "role": "reviewer", "tenant": tenant_a.tenant.slug})
    assert created.status_code == 302 and created["Location"] == "/console/users/"
    page = root.get("/console/users/")
    assert "Console user rita created." in text(page)
    assert "reviewer" in row(page, "user-rita") and "Acme" in row(page, "user-rita")
    rita = Client()
    assert rita.login(username="rita", password=NEW_PASSWORD)
    landing = rita.get("/console/")
    assert landing["Location"] == f"/console/t/{tenant_a.tenant.slug}/reviews/"
    actions = audit_actions(tenant_a)
    assert ("console_user_created", "system:console:root") in actions
    assert ("console_member_set", "system:console:root") in actions
    assert audit_details(tenant_a, "console_member_set") == [
        {"role": "reviewer", "previousRole": None}]


@CROSS_TENANT
def test_it_creates_a_platform_admin_without_a_membership(root: Client, tenant_a: Any) -> None:
    assert root.post("/console/users/new/", {
        "username": "ops", "password": NEW_PASSWORD, "role": "platform",
        "tenant": tenant_a.tenant.slug}).status_code == 302
    ops = user("ops")
    assert ops.is_superuser and ops.is_staff and membership("ops") is None
    assert "/console/users/" in text(signed_in(ops).get("/console/"))


@CROSS_TENANT
def test_a_refused_password_or_a_taken_username_is_shown_on_the_page(
        root: Client, tenant_a: Any, tenant_b: Any) -> None:
    console_user(tenant_b, "bob", "reviewer")
    short = root.post("/console/users/new/", {
        "username": "rita", "password": "abc", "role": "reviewer",
        "tenant": tenant_a.tenant.slug})
    assert short.status_code == 400
    assert re.search(r'id="user-new-errors"[^>]*>This password is too short', text(short))
    assert 'value="rita"' in text(short) and 'value="abc"' not in text(short)
    common = root.post("/console/users/new/", {
        "username": "rita", "password": "password123", "role": "reviewer",
        "tenant": tenant_a.tenant.slug})
    assert common.status_code == 400 and "too common" in text(common)
    taken = root.post("/console/users/new/", {
        "username": "bob", "password": NEW_PASSWORD, "role": "admin",
        "tenant": tenant_a.tenant.slug})
    assert taken.status_code == 400
    assert "A user with that username already exists." in text(taken)
    assert not get_user_model().objects.filter(username="rita").exists()
    assert member("bob").tenant_id == tenant_b.tenant.pk
    assert not [a for a in audit_actions(tenant_a) if a[0].startswith(CONSOLE_ACTIONS)]


@CROSS_TENANT
@pytest.mark.parametrize("bad", [
    {"username": ""}, {"username": "x y"}, {"username": "r" * 400}, {"password": ""},
    {"role": "owner"}, {"tenant": ""}, {"tenant": "no-such"}, {"email": "not-an-email"}])
def test_bad_input_answers_400_with_an_error_never_500(root: Client, tenant_a: Any,
                                                       bad: dict[str, str]) -> None:
    answer = root.post("/console/users/new/", {
        "username": "rita", "password": NEW_PASSWORD, "role": "admin", "tenant": "acme", **bad})
    assert answer.status_code == 400
    assert 'id="user-new-errors"' in text(answer)
    assert not get_user_model().objects.exclude(username="root").exists()


@CROSS_TENANT
def test_it_changes_a_role_and_moves_a_user_to_another_tenant(root: Client, tenant_a: Any,
                                                              tenant_b: Any) -> None:
    alice = console_user(tenant_a, "alice", "admin")
    place = f"/console/users/{alice.pk}/membership/"
    assert root.post(place, {"role": "reviewer", "tenant": "acme"}).status_code == 302
    assert member("alice").role == "reviewer"
    assert "alice: role changed." in text(root.get("/console/users/"))
    assert root.post(place, {"role": "admin", "tenant": tenant_b.tenant.slug}).status_code == 302
    moved = membership("alice")
    assert moved is not None and moved.tenant_id == tenant_b.tenant.pk and moved.role == "admin"
    client = signed_in(alice)
    assert client.get(f"/console/t/{tenant_b.tenant.slug}/").status_code == 200
    assert client.get(f"/console/t/{tenant_a.tenant.slug}/").status_code == 404
    assert audit_details(tenant_a, "console_member_set")[-1] == {
        "role": "reviewer", "previousRole": "admin"}
    assert audit_details(tenant_a, "console_member_removed") == [
        {"previousRole": "reviewer", "reason": "moved to another tenant"}]
    assert audit_details(tenant_b, "console_member_set") == [
        {"role": "admin", "previousRole": None}]
    assert "Globex" not in str(audit_details(tenant_a, "console_member_removed"))
    refused = root.post(place, {"role": "admin", "tenant": "no-such"}, follow=True)
    assert "Choose an active tenant" in text(refused)
    assert member("alice").tenant_id == tenant_b.tenant.pk


@CROSS_TENANT
def test_platform_admins_are_promoted_and_demoted(root: Client, tenant_a: Any) -> None:
    alice = console_user(tenant_a, "alice", "admin")
    ops = platform_admin("ops")
    assert root.post(f"/console/users/{alice.pk}/membership/",
                     {"role": "platform", "tenant": ""}).status_code == 302
    assert user("alice").is_superuser and membership("alice") is None
    assert audit_details(tenant_a, "console_member_removed") == [
        {"previousRole": "admin", "reason": "made a platform admin"}]
    assert root.post(f"/console/users/{ops.pk}/membership/",
                     {"role": "reviewer", "tenant": "acme"}).status_code == 302
    assert not user("ops").is_superuser and not user("ops").is_staff
    assert member("ops").role == "reviewer"


@CROSS_TENANT
def test_it_deactivates_reactivates_and_removes_memberships(root: Client,
                                                            tenant_a: Any) -> None:
    alice = console_user(tenant_a, "alice", "admin")
    client = signed_in(alice)
    assert root.post(f"/console/users/{alice.pk}/active/", {"active": "off"}).status_code == 302
    assert not user("alice").is_active
    assert "alice deactivated." in text(root.get("/console/users/"))
    assert client.get(f"/console/t/{tenant_a.tenant.slug}/").status_code == 302  # signed out
    assert not Client().login(username="alice", password=PASSWORD)
    assert root.post(f"/console/users/{alice.pk}/active/", {"active": "on"}).status_code == 302
    assert user("alice").is_active
    assert root.post(f"/console/users/{alice.pk}/membership/remove/").status_code == 302
    assert membership("alice") is None and user("alice").is_active
    assert signed_in(alice).get("/console/").status_code == 403  # no console access
    assert [a for a, _ in audit_actions(tenant_a) if a.startswith("console_user_")
            or a == "console_member_removed"] == [
        "console_user_deactivated", "console_user_reactivated", "console_member_removed"]
    again = root.post(f"/console/users/{alice.pk}/membership/remove/", follow=True)
    assert "alice has no tenant membership." in text(again)


@CROSS_TENANT
def test_a_platform_admin_cannot_deactivate_or_demote_themselves(root: Client,
                                                                 tenant_a: Any) -> None:
    me = user("root")
    refused = root.post(f"/console/users/{me.pk}/active/", {"active": "off"}, follow=True)
    assert "You cannot deactivate yourself" in text(refused)
    demoted = root.post(f"/console/users/{me.pk}/membership/",
                        {"role": "admin", "tenant": "acme"}, follow=True)
    assert "You cannot demote yourself" in text(demoted)
    me.refresh_from_db()
    assert me.is_active and me.is_superuser and membership("root") is None
    assert not [a for a in audit_actions(tenant_a) if a[0].startswith(CONSOLE_ACTIONS)]


@CROSS_TENANT
def test_a_missing_user_answers_the_consoles_404(root: Client) -> None:
    for path in ("active/", "membership/", "membership/remove/"):
        answer = root.post(f"/console/users/{MISSING_USER}/{path}", {"active": "off",
                                                                    "role": "admin"})
        assert answer.status_code == 404 and "Not found" in text(answer)


def test_only_platform_admins_may_open_the_users_page(tenant_a: Any) -> None:
    bob = console_user(tenant_a, "bob", "reviewer")
    for role, account in (("admin", console_user(tenant_a, "alice", "admin")), ("reviewer", bob)):
        client = signed_in(account)
        page = client.get("/console/users/")
        assert page.status_code == 403 and 'id="forbidden"' in text(page), role
        for path, data in (("new/", {"username": "evil", "password": NEW_PASSWORD,
                                     "role": "platform"}),
                           (f"{bob.pk}/membership/", {"role": "platform"}),
                           (f"{bob.pk}/active/", {"active": "off"}),
                           (f"{bob.pk}/membership/remove/", {})):
            assert client.post(f"/console/users/{path}", data).status_code == 403, (role, path)
    assert not get_user_model().objects.filter(username="evil").exists()
    assert user("bob").is_active and not user("bob").is_superuser
    assert membership("bob") is not None
    assert Client().get("/console/users/")["Location"].startswith("/console/login/")


# --- tenant admins: members on the Settings page ---------------------------------------------


def settings_url(tenant: Any, path: str = "") -> str:
    return f"/console/t/{tenant.tenant.slug}/settings/{path}"


def test_a_tenant_admin_adds_a_member(tenant_a: Any, tenant_b: Any, admin: Client) -> None:
    console_user(tenant_b, "bob", "reviewer")
    page = admin.get(settings_url(tenant_a))
    assert "alice (you)" in row(page, "member-alice") and "bob" not in text(page)
    added = admin.post(settings_url(tenant_a, "members/"), {
        "username": "rita", "password": NEW_PASSWORD, "role": "reviewer"})
    assert added.status_code == 302 and added["Location"].endswith("/settings/#members")
    page = admin.get(settings_url(tenant_a))
    assert "rita can now sign in as reviewer." in text(page)
    assert '<td class="role">reviewer</td>' in row(page, "member-rita")
    with tenant_scope(tenant_a.ctx):
        assert ConsoleMembership.objects.get(user__username="rita").role == "reviewer"
    assert ("console_user_created", "user:alice") in audit_actions(tenant_a)
    taken = admin.post(settings_url(tenant_a, "members/"), {
        "username": "bob", "password": NEW_PASSWORD, "role": "admin"})
    assert taken.status_code == 400 and "already exists" in text(taken)
    assert member("bob").tenant_id == tenant_b.tenant.pk
    weak = admin.post(settings_url(tenant_a, "members/"), {
        "username": "sam", "password": "sam", "role": "admin"})
    assert weak.status_code == 400
    assert re.search(r'id="member-new-errors"[^>]*>[^<]*too short', text(weak))
    assert 'value="sam"' in text(weak)
    assert not get_user_model().objects.filter(username="sam").exists()


def test_a_tenant_admin_changes_roles_and_removes_members(tenant_a: Any, admin: Client) -> None:
    rita = console_user(tenant_a, "rita", "reviewer")
    assert admin.post(settings_url(tenant_a, f"members/{rita.pk}/role/"),
                      {"role": "admin"}).status_code == 302
    assert member("rita").role == "admin"
    assert "rita is now tenant admin." in text(admin.get(settings_url(tenant_a)))
    bad = admin.post(settings_url(tenant_a, f"members/{rita.pk}/role/"), {"role": "owner"},
                     follow=True)
    assert "Choose a role" in text(bad)
    assert admin.post(settings_url(tenant_a, f"members/{rita.pk}/remove/")).status_code == 302
    assert membership("rita") is None
    assert "member-rita" not in text(admin.get(settings_url(tenant_a)))
    mine = [a for a, actor in audit_actions(tenant_a) if actor == "user:alice"]
    assert mine == ["console_member_set", "console_member_removed"]


def test_a_tenant_admin_cannot_demote_or_remove_themselves(tenant_a: Any,
                                                          admin: Client) -> None:
    alice = user("alice")
    demoted = admin.post(settings_url(tenant_a, f"members/{alice.pk}/role/"),
                         {"role": "reviewer"}, follow=True)
    assert "You cannot demote yourself" in text(demoted)
    removed = admin.post(settings_url(tenant_a, f"members/{alice.pk}/remove/"), follow=True)
    assert "You cannot remove yourself" in text(removed)
    assert member("alice").role == "admin"


def _without_tokens(response: Any) -> str:
    """The page without its CSRF tokens (they differ on every answer)."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", text(response))


def test_another_tenants_user_answers_like_a_missing_one(tenant_a: Any, tenant_b: Any,
                                                         admin: Client) -> None:
    bob = console_user(tenant_b, "bob", "admin")
    for path, data in (("role/", {"role": "reviewer"}), ("remove/", {})):
        foreign = admin.post(settings_url(tenant_a, f"members/{bob.pk}/{path}"), data)
        missing = admin.post(settings_url(tenant_a, f"members/{MISSING_USER}/{path}"), data)
        assert foreign.status_code == missing.status_code == 404
        assert _without_tokens(foreign) == _without_tokens(missing)
        assert [t.name for t in foreign.templates] == [t.name for t in missing.templates]
    assert (member("bob").role, member("bob").tenant_id) == ("admin", tenant_b.tenant.pk)
    assert not [a for a in audit_actions(tenant_b) if a[0].startswith(CONSOLE_ACTIONS)
                and a[1] == "user:alice"]


def test_reviewers_cannot_manage_members(tenant_a: Any) -> None:
    alice = console_user(tenant_a, "alice", "admin")
    client = signed_in(console_user(tenant_a, "rita", "reviewer"))
    assert client.post(settings_url(tenant_a, "members/"), {
        "username": "sam", "password": NEW_PASSWORD, "role": "admin"}).status_code == 403
    assert client.post(settings_url(tenant_a, f"members/{alice.pk}/remove/")).status_code == 403
    assert membership("alice") is not None
    assert not get_user_model().objects.filter(username="sam").exists()


@CROSS_TENANT
def test_the_user_list_is_paged(root: Client) -> None:
    from console.views.users import PAGE_SIZE

    client = root
    get_user_model().objects.bulk_create([
        get_user_model()(username=f"user-{i:03d}") for i in range(PAGE_SIZE + 4)])
    first = client.get("/console/users/")
    second = client.get("/console/users/", {"page": 2})
    total = PAGE_SIZE + 5  # and root
    assert f"Users 1–{PAGE_SIZE} of {total}" in text(first)
    assert f"Users {PAGE_SIZE + 1}–{total} of {total}" in text(second)
    listed = [re.findall(r'<tr id="user-([^"]+)">', text(page)) for page in (first, second)]
    assert len(listed[0]) == PAGE_SIZE and len(listed[1]) == 5
    assert not set(listed[0]) & set(listed[1])
    assert 'id="users-next"' in text(first) and 'id="users-previous"' in text(second)
