from __future__ import annotations

from rest_framework.routers import SimpleRouter

from tenants.api.views import OrganizationViewSet, ProjectViewSet, TeamViewSet

router = SimpleRouter(trailing_slash=False)
router.register("orgs", OrganizationViewSet, basename="org")
router.register("teams", TeamViewSet, basename="team")
router.register("projects", ProjectViewSet, basename="project")
urlpatterns = router.urls
