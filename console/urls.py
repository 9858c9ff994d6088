"""Console URLs, under ``/console/``. Tenant pages carry the tenant's slug:
``/console/t/<slug>/...``."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

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

#: A user's console accounts and memberships (platform staff): ``/console/users/...``.
user_urlpatterns = [
    path("", users.users, name="users"),
    path("new/", users.user_new, name="user-new"),
    path("<int:user_id>/membership/", users.user_place, name="user-membership"),
    path("<int:user_id>/membership/remove/", users.user_membership_remove,
         name="user-membership-remove"),
    path("<int:user_id>/active/", users.user_active, name="user-active"),
]

#: The pages of one tenant: ``/console/t/<slug>/...``, each view given ``tenant_slug``.
tenant_urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("memories/", memories.explorer, name="memories"),
    path("memories/bulk/", browse.memory_bulk, name="memory-bulk"),
    path("memories/export/", browse.memory_export, name="memory-export"),
    path("memories/<uuid:memory_id>/", memories.memory_detail, name="memory"),
    path("memories/<uuid:memory_id>/<str:action>/", memories.memory_action,
         name="memory-action"),
    path("graph/", graph.graph_index, name="graph"),
    path("graph/entities/<str:entity_id>/", graph.graph_entity, name="graph-entity"),
    path("summaries/", summaries.summary_list, name="summaries"),
    path("summaries/<uuid:scope_id>/", summaries.summary_detail, name="summary"),
    path("summaries/<uuid:scope_id>/regenerate/", summaries.summary_regenerate,
         name="summary-regenerate"),
    path("context/", summaries.context_preview, name="context"),
    path("policies/", policies.policies, name="policies"),
    path("policies/new/", policies.policy_new, name="policy-new"),
    path("policies/<uuid:policy_id>/", policies.policy_edit, name="policy"),
    path("policies/<uuid:policy_id>/delete/", policies.policy_remove, name="policy-delete"),
    path("reviews/", reviews.reviews, name="reviews"),
    path("reviews/decide/", reviews.review_decide_view, name="review-decide"),
    path("reviews/<uuid:item_id>/", reviews.review_detail, name="review"),
    path("llm/", llm_usage.llm_usage, name="llm-usage"),
    path("audit/", audit.audit_log, name="audit"),
    path("settings/", settings.tenant_settings, name="settings"),
    path("settings/summaries/", settings.summary_triggers, name="summary-triggers"),
    path("settings/keys/", settings.key_create, name="key-create"),
    path("settings/keys/<uuid:key_id>/revoke/", settings.key_revoke, name="key-revoke"),
    path("settings/members/", settings.member_add, name="member-add"),
    path("settings/members/<int:user_id>/role/", settings.member_role, name="member-role"),
    path("settings/members/<int:user_id>/remove/", settings.member_remove,
         name="member-remove"),
]

urlpatterns = [
    path("", home.index, name="index"),
    path("login/", auth_views.LoginView.as_view(
        template_name="console/login.html", next_page="console:index",
        extra_context={"title": "Sign in"}), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="console:login"), name="logout"),
    path("switch/", home.switch, name="switch"),
    path("tenants/new/", platform.tenant_new, name="tenant-new"),
    path("tenants/<slug:tenant_slug>/active/", platform.tenant_active, name="tenant-active"),
    path("users/", include(user_urlpatterns)),
    path("t/<slug:tenant_slug>/", include(tenant_urlpatterns)),
]
