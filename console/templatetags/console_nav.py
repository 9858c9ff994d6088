"""Template tags of the console's frame: the tenant pages' navigation and the platform
admins' tenant switcher."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from tenants.models import Tenant

register = template.Library()


@register.simple_tag(takes_context=True)
def console_tab(context: dict[str, Any], name: str, label: str, url_name: str) -> SafeString:
    """One ``<li>`` of the tenant navigation: a link to ``url_name`` for the tenant in
    ``context["access"]``, marked ``class="active"`` and ``aria-current="page"`` when
    ``context["tab"] == name``."""
    access = context["access"]
    href = reverse(url_name, args=[access.tenant.slug])
    if context.get("tab") == name:
        return format_html('<li class="active"><a aria-current="page" href="{}">{}</a></li>',
                           href, label)
    return format_html('<li><a href="{}">{}</a></li>', href, label)


@register.simple_tag
def console_tenants() -> list[Tenant]:
    """The active tenants, by name, for the platform admins' switcher (at most 500: a
    platform with more uses the console's home page to find one)."""
    return list(Tenant.objects.filter(is_active=True).only("slug", "name").order_by("name")[:500])
