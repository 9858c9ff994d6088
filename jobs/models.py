"""A Celery job waiting to be handed to the broker (the transactional outbox)."""

from __future__ import annotations

from django.db import models
from uuid6 import uuid7

from tenants.managers import TenantOwnedModel


class QueuedJob(TenantOwnedModel):
    """One Celery task call not yet accepted by the broker.

    Written in the same transaction as the change that asks for it, so the job exists
    exactly when that change was committed; deleted in the transaction that saw the broker
    accept it. ``id`` (a UUIDv7, so rows sort by creation) is also the Celery task id, so a
    message sent twice (a crash between the broker's acceptance and the delete) carries the
    same id, and the task being idempotent makes the second run change nothing.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    task = models.CharField(max_length=200)  # a registered Celery task name
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    queue = models.CharField(max_length=200, blank=True, default="")  # "" = default queue
    created_at = models.DateTimeField(auto_now_add=True)
    attempts = models.PositiveIntegerField(default=0)  # failed hand-overs to the broker
    last_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.task} {self.id}"
