"""The restrictions of a restricted API key (README "Restricted API keys").

A key may be restricted to layers (``allowed_layers``) and bound to identifiers
(``pinned_identifiers``, e.g. ``userId=u1``). Three checks enforce it:

1. ``memories.retrieval.partition.resolve_identifiers`` fills in pinned identifiers a call
   leaves out and refuses (403 ``UNAUTHORIZED``) a call that names another value;
2. :func:`check_layer` refuses writes and explicit reads of a layer the key lacks;
3. :func:`restriction_q` narrows every ``Memory.objects`` query made under the key (the
   model's manager applies it), so get, update, delete, history, feedback, search, recall
   and list all see only the rows the key may touch; a row outside answers exactly as a
   missing one (404).
"""

from __future__ import annotations

from django.db.models import Q

from memory_project.errors import Unauthorized
from tenants.context import TenantContext
from tenants.layers import IDENTIFIER_FIELDS, REQUIRED, Layer


def check_layer(ctx: TenantContext, layer: Layer) -> None:
    """Refuse ``layer`` when the caller's key is restricted to other layers.

    Raises:
        Unauthorized: the key's ``allowed_layers`` do not include ``layer``.
    """
    if ctx.allowed_layers and layer.value not in ctx.allowed_layers:
        raise Unauthorized(f"This API key may not use the {layer.value!r} layer.",
                           details={"allowedLayers": sorted(ctx.allowed_layers)})


def allowed_layers_of(ctx: TenantContext, layers: list[Layer]) -> list[Layer]:
    """``layers`` without those the caller's key may not use (order kept)."""
    if not ctx.allowed_layers:
        return layers
    return [layer for layer in layers if layer.value in ctx.allowed_layers]


def restriction_q(ctx: TenantContext) -> Q | None:
    """The rows a restricted key may touch, or ``None`` for an unrestricted caller.

    A row qualifies when its layer is allowed and, for each pinned identifier the row's
    layer is scoped by (seed 001 "Layer Requirements Matrix"), its column has the pinned
    value: a key pinned to ``userId=u1`` reaches u1's agent, user and session memories and
    the project, team, org and company layers it is allowed.
    """
    if not ctx.is_restricted:
        return None
    pins = dict(ctx.pinned_identifiers)
    layers = [layer for layer in Layer if not ctx.allowed_layers
              or layer.value in ctx.allowed_layers]
    q = Q(pk__in=[])
    for layer in layers:
        columns = {IDENTIFIER_FIELDS[name]: pins[name] for name in REQUIRED[layer]
                   if name in pins}
        q |= Q(layer=layer.value, **columns)
    return q
