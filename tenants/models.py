"""Tenants (companies), the org → team → project hierarchy, API keys, and the audit log."""

from __future__ import annotations

import uuid

from django.db import models
from uuid6 import uuid7

from tenants.managers import TenantOwnedModel


class Tenant(models.Model):
    """A tenant is a company: the unit of isolation. Its ``slug`` is the ``companyId``.

    Not itself tenant-owned (it is the tenant), so it has no row-level security; every table
    that belongs to a tenant does.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    is_active = models.BooleanField(default=True)
    settings = models.JSONField(default=dict, blank=True)
    #: Replaced by a new random UUID, by triggers, whenever the tenant's settings, policies,
    #: organisations, teams or projects change (migration ``tenants.0003``); the key of the
    #: per-process configuration cache (``tenants.config_cache``).
    config_version = models.UUIDField(default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class HierarchyNode(TenantOwnedModel):
    """Abstract base of the org → team → project levels: a node named by ``external_id``
    (the layer's ``orgId``/``teamId``/``projectId``), unique within its tenant."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    external_id = models.CharField(max_length=255)
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return self.name or self.external_id


class Organization(HierarchyNode):
    """An organisation inside a company; the ``org`` layer's ``orgId`` is ``external_id``."""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "external_id"], name="uniq_org_external_id")
        ]


class Team(HierarchyNode):
    """A team inside an organisation; ``teamId`` is ``external_id``."""

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="teams")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "external_id"], name="uniq_team_external_id")
        ]


class Project(HierarchyNode):
    """A project inside a team (or directly in the company); ``projectId`` is ``external_id``.

    A call that names a project reaches its team, org and company layers (seed 001).
    """

    team = models.ForeignKey(
        Team, on_delete=models.SET_NULL, null=True, blank=True, related_name="projects"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "external_id"], name="uniq_project_external_id"
            )
        ]


class ApiKey(TenantOwnedModel):
    """An API key. Only a SHA-256 digest of the key is stored; the key is shown once.

    Keys look like ``msk_`` + 8 lookup characters + a 43-character secret. The first 12
    characters (``prefix``) find the row; the digest comparison is constant-time.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=12, unique=True)
    key_hash = models.CharField(max_length=64)
    roles = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=200, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Restrictions (README "Restricted API keys"): empty means unrestricted.
    allowed_layers = models.JSONField(
        default=list, blank=True, help_text='Layers the key may touch, e.g. ["user"]; '
        "empty: every layer.")
    pinned_identifiers = models.JSONField(
        default=dict, blank=True, help_text='Identifiers the key is bound to, e.g. '
        '{"userId": "u1"}; empty: none.')
    rate_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Requests per rate-limit window; empty: the "
        "service default (RATE_LIMIT_REQUESTS).")

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class AuditEntry(TenantOwnedModel):
    """One audit log entry. Append-only: the app role may insert and read, never change."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=255, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "audit log"
        db_table = "governance_auditentry"  # the table predates the move to tenants

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action}"


class SecurityProbe(models.Model):
    """A lookup of an id that the caller's tenant does not have: the platform's security log.

    Recorded for every such miss, whether or not the id exists in another tenant, so that the
    request does the same work either way (no timing difference, no tenant-visible trace);
    a beat job (``tenants.audit.security_probes_classify``) later marks the ones that
    named another tenant's object. Not tenant-owned: the application's role may only insert
    (``tenants.rls.INSERT_ONLY_TABLES``); platform staff read it in the admin.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    prober_tenant_id = models.UUIDField(db_index=True)  # not tenant-owned: no tenant_id
    actor = models.CharField(max_length=200)
    target_type = models.CharField(max_length=64)
    target_id = models.UUIDField()
    #: ``None`` until classified; then whether the id belonged to another tenant.
    cross_tenant = models.BooleanField(null=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        db_table = "governance_securityprobe"  # the table predates the move to tenants

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor} {self.target_type}"
