"""Celery task of the security log (thin: calls the service)."""

from __future__ import annotations

from celery import shared_task

from tenants import audit


# The name predates the move of the security log to tenants; beat entries already stored
# under it (``memory_project.schedule`` never rewrites them) keep working.
@shared_task(name="governance.security_probes_classify", acks_late=True)
def security_probes_classify() -> dict[str, int]:
    """Mark which recorded misses named another tenant's object
    (``tenants.audit.security_probes_classify``)."""
    return audit.security_probes_classify()
