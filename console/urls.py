"""Console URLs, under ``/console/``. Tenant pages carry the tenant's slug:
``/console/t/<slug>/...``."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from console.views import (
    audit,
    browse,
    dashboard,
    graph,
    home,
    llm_usage,
    memories,
    platform,
    policies,
    reviews,
    settings,
    summaries,
    users,
)

app_name = "console"

urlpatterns = [
    path("", home.index, name="index"),
    path("login/", auth_views.LoginView.as_view(
        template_name="console/login.html", next_page="console:index",
        extra_context={"title": "Sign in"}), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="console:login"), name="logout"),
    path("switch/", home.switch, name="switch"),
    path("tenants/new/", platform.tenant_new, name="tenant-new"),
    path("tenants/<slug:tenant_slug>/active/", platform.tenant_active, name="tenant-active"),
    path("users/", users.users, name="users"),
    path("users/new/", users.user_new, name="user-new"),
    path("users/<int:user_id>/membership/", users.user_place, name="user-membership"),
    path("users/<int:user_id>/membership/remove/", users.user_membership_remove,
         name="user-membership-remove"),
    path("users/<int:user_id>/active/", users.user_active, name="user-active"),
    path("t/<slug:tenant_slug>/", dashboard.dashboard, name="dashboard"),
    path("t/<slug:tenant_slug>/memories/", memories.explorer, name="memories"),
    path("t/<slug:tenant_slug>/memories/bulk/", browse.memory_bulk, name="memory-bulk"),
    path("t/<slug:tenant_slug>/memories/export/", browse.memory_export, name="memory-export"),
    path("t/<slug:tenant_slug>/memories/<uuid:memory_id>/", memories.memory_detail,
         name="memory"),
    path("t/<slug:tenant_slug>/memories/<uuid:memory_id>/<str:action>/",
         memories.memory_action, name="memory-action"),
    path("t/<slug:tenant_slug>/graph/", graph.graph_index, name="graph"),
    path("t/<slug:tenant_slug>/graph/entities/<str:entity_id>/", graph.graph_entity,
         name="graph-entity"),
    path("t/<slug:tenant_slug>/summaries/", summaries.summary_list, name="summaries"),
    path("t/<slug:tenant_slug>/summaries/<uuid:scope_id>/", summaries.summary_detail,
         name="summary"),
    path("t/<slug:tenant_slug>/summaries/<uuid:scope_id>/regenerate/",
         summaries.summary_regenerate, name="summary-regenerate"),
    path("t/<slug:tenant_slug>/context/", summaries.context_preview, name="context"),
    path("t/<slug:tenant_slug>/policies/", policies.policies, name="policies"),
    path("t/<slug:tenant_slug>/policies/new/", policies.policy_new, name="policy-new"),
    path("t/<slug:tenant_slug>/policies/<uuid:policy_id>/", policies.policy_edit,
         name="policy"),
    path("t/<slug:tenant_slug>/policies/<uuid:policy_id>/delete/", policies.policy_remove,
         name="policy-delete"),
    path("t/<slug:tenant_slug>/reviews/", reviews.reviews, name="reviews"),
    path("t/<slug:tenant_slug>/reviews/decide/", reviews.review_decide_view,
         name="review-decide"),
    path("t/<slug:tenant_slug>/reviews/<uuid:item_id>/", reviews.review_detail,
         name="review"),
    path("t/<slug:tenant_slug>/llm/", llm_usage.llm_usage, name="llm-usage"),
    path("t/<slug:tenant_slug>/audit/", audit.audit_log, name="audit"),
    path("t/<slug:tenant_slug>/settings/", settings.tenant_settings, name="settings"),
    path("t/<slug:tenant_slug>/settings/summaries/", settings.summary_triggers,
         name="summary-triggers"),
    path("t/<slug:tenant_slug>/settings/keys/", settings.key_create, name="key-create"),
    path("t/<slug:tenant_slug>/settings/keys/<uuid:key_id>/revoke/", settings.key_revoke,
         name="key-revoke"),
    path("t/<slug:tenant_slug>/settings/members/", settings.member_add, name="member-add"),
    path("t/<slug:tenant_slug>/settings/members/<int:user_id>/role/", settings.member_role,
         name="member-role"),
    path("t/<slug:tenant_slug>/settings/members/<int:user_id>/remove/",
         settings.member_remove, name="member-remove"),
]
