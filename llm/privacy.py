"""What content may leave this machine: the redaction applied before a remote model sees it.

The language-model layer does not know the tenant's policies; governance registers the one
function that does (``governance.apps``), so that the layers stay in order (governance above
the model layer).
"""

from __future__ import annotations

from collections.abc import Callable

from tenants.context import TenantContext

#: ``ctx -> (text -> text) | None``: the tenant's redaction for a remote model, or ``None``
#: when its policies do not redact.
Redactor = Callable[[TenantContext], Callable[[str], str] | None]
_redactor: Redactor | None = None


def register_redactor(redactor: Redactor) -> None:
    """Set the function that gives a tenant's redaction (``governance`` at start-up)."""
    global _redactor
    _redactor = redactor


def redaction_for(ctx: TenantContext) -> Callable[[str], str] | None:
    """``text -> text`` removing PII under ``ctx``'s policies, or ``None`` when they keep
    content as it is (or no governance is installed)."""
    return _redactor(ctx) if _redactor is not None else None
