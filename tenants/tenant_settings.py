"""One typed home for a tenant's settings (``GET/PATCH /api/v1/settings``).

The settings document is JSON with one object per section (``search``, ``recall``,
``lifecycle``, ``llm``). Each section is a frozen dataclass owned by the app that uses it,
which registers it from ``AppConfig.ready()`` with :func:`register_section`: its defaults
live in the dataclass, and its ``parse`` both validates a patch (on write) and builds the
value (on read). A read goes through :func:`section`, parsed once per configuration version
of the tenant (``tenants.config_cache``), so a request reads its settings once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from memory_project.errors import InvalidInput
from tenants.config_cache import cached
from tenants.context import TenantContext
from tenants.input_checks import reject_unknown_keys, reject_unstorable
from tenants.selectors import tenant_settings_of

logger = logging.getLogger(__name__)

S = TypeVar("S")


@dataclass(frozen=True)
class SectionSpec:
    """A registered section: its keys, and ``parse(values) -> dataclass`` (raises
    :class:`InvalidInput` naming the bad key)."""

    name: str
    keys: frozenset[str]
    parse: Callable[[dict[str, Any]], Any]
    #: Stricter check of a patch than ``parse`` (which may be lenient on read); ``None``:
    #: ``parse`` validates.
    validate: Callable[[dict[str, Any]], Any] | None = None


_sections: dict[str, SectionSpec] = {}


def register_section(name: str, keys: set[str] | frozenset[str],
                     parse: Callable[[dict[str, Any]], Any],
                     validate: Callable[[dict[str, Any]], Any] | None = None) -> None:
    """Register the settings section ``name`` (from ``AppConfig.ready()``): its keys,
    ``parse(values) -> dataclass`` and, when reading should be more lenient than writing,
    ``validate(values)`` for patches."""
    _sections[name] = SectionSpec(name, frozenset(keys), parse, validate)


def _parse(spec: SectionSpec, values: Any, *, strict: bool = False) -> Any:
    if not isinstance(values, dict):
        raise InvalidInput(f"Settings section {spec.name!r} must be an object.")
    reject_unknown_keys(values, spec.keys, f"{spec.name} setting")
    if strict and spec.validate is not None:
        spec.validate(values)
    return spec.parse(values)


def validate_patch(patch: Any) -> dict[str, Any]:
    """Check a settings patch section by section.

    Returns:
        ``{section name: its parsed dataclass}`` for the sections the patch names (the patch
        itself is not changed).

    Raises:
        InvalidInput: not an object, text that cannot be stored, an unknown section or key,
            or a value its section's ``parse`` refuses.
    """
    if not isinstance(patch, dict):
        raise InvalidInput("settings must be an object.")
    reject_unstorable(patch, "settings")
    parsed: dict[str, Any] = {}
    for name, values in patch.items():
        spec = _sections.get(name)
        if spec is None:
            raise InvalidInput(f"Unknown settings section {name!r}.", details={
                "allowed": {k: sorted(s.keys) for k, s in sorted(_sections.items())}})
        parsed[name] = _parse(spec, values, strict=True)
    return parsed


def section(ctx: TenantContext, name: str) -> Any:
    """The tenant's section ``name`` as its dataclass, defaults filled in. A stored value that
    no longer validates (written before a rule tightened) is logged and left out.

    Raises:
        KeyError: no section ``name`` is registered (a programming error).
    """
    spec = _sections[name]

    def load() -> Any:
        stored = tenant_settings_of(ctx).get(name)
        try:
            return _parse(spec, stored if isinstance(stored, dict) else {})
        except InvalidInput as err:
            logger.warning("tenant %s: ignoring stored %s settings: %s", ctx.tenant_slug,
                           name, err.message)
            return spec.parse({})

    return cached(ctx.tenant_id, f"settings.{name}", None, load)
