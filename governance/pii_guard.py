"""PII detection for a tenant's request, bounded so that no input can stall the service.

Detection (``governance.pii``) is cheap on prose but up to two orders of magnitude dearer per
character of digit-dense text (libphonenumber tries every digit run as a phone number in four
regions; figures: ``docs/performance.md``, "PII detection"). :func:`detect_for` scans cheap
texts in the calling thread and sends expensive ones to :func:`tenants.heavy_work.run_heavy`:
a worker process outside the web workers, at most ``HEAVY_WORK_PER_TENANT`` at once per
tenant, within a time limit.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from governance.pii import Finding, detect, redact
from tenants.context import TenantContext
from tenants.heavy_work import run_heavy

Detector = Callable[[str], list[Finding]]


def scan_cost(text: str) -> int:
    """Estimated cost of scanning ``text``, in digits: each digit costs about as much as 100
    characters of anything else (measured on LoCoMo turns and on digit-dense text). ASCII
    digits only: other scripts' digits are rare and counted as characters."""
    return sum(text.count(digit) for digit in "0123456789") + len(text) // 100


def detect_for(ctx: TenantContext, text: str) -> list[Finding]:
    """``governance.pii.detect(text)`` on behalf of ``ctx``'s tenant.

    Raises:
        RateLimited: the tenant already runs its share of heavy scans.
        WorkBudgetExceeded: the scan would take longer than a request may.
    """
    if scan_cost(text) < settings.PII_INLINE_COST:
        return detect(text)
    return run_heavy(str(ctx.tenant_id), detect, text, tuple(settings.PII_PHONE_REGIONS))


def detector_for(ctx: TenantContext) -> Detector:
    """:func:`detect_for` bound to ``ctx``."""
    return lambda text: detect_for(ctx, text)


def redact_for(ctx: TenantContext, text: str) -> tuple[str, list[Finding]]:
    """``governance.pii.redact(text)`` with the detection of :func:`detect_for`."""
    return redact(text, detect_for(ctx, text))
