"""Celery task of the security log (thin: calls the service)."""

from __future__ import annotations

from celery import shared_task

from governance import services


@shared_task(name="governance.security_probes_classify", acks_late=True)
def security_probes_classify() -> dict[str, int]:
    """Mark which recorded misses named another tenant's object
    (``governance.services.security_probes_classify``)."""
    return services.security_probes_classify()
