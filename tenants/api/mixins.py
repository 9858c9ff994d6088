"""The one viewset mixin that owns queryset and object lookup for tenant-owned models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet

from memory_project.errors import MemoryServiceError, NotFound
from memory_project.validation import unstorable_text
from tenants.audit import audit_cross_tenant_probe
from tenants.context import require_context


class TenantScopedViewSetMixin:
    """Owns ``get_queryset`` and ``get_object``; subclasses may not override either.

    Subclasses name a selector (``queryset_selector``) returning the active tenant's rows.
    Another tenant's object is indistinguishable from a missing one: both raise
    ``not_found_error`` (404).
    """

    queryset_selector: ClassVar[Callable[[], QuerySet[Any]]]
    lookup_field: str = "pk"
    lookup_url_kwarg: str | None = None
    not_found_error: ClassVar[type[MemoryServiceError]] = NotFound
    kwargs: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("get_queryset", "get_object"):
            if name in cls.__dict__:
                raise TypeError(f"{cls.__name__} must not override {name}()")

    def get_queryset(self) -> QuerySet[Any]:
        require_context()
        return type(self).queryset_selector()

    def get_object(self) -> Model:
        value = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        try:
            # A value the database cannot even hold (NUL) names nothing either.
            obj = None if unstorable_text(value) else (
                self.get_queryset().filter(**{self.lookup_field: value}).first()
            )
        except (ValidationError, ValueError):
            obj = None  # a malformed id is just another id that does not exist
        if obj is None:
            if self.lookup_field == "pk":
                model = self.get_queryset().model
                audit_cross_tenant_probe(require_context(), model=model, object_id=value)
            raise self.not_found_error()
        return obj
