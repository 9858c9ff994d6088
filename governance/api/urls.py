from __future__ import annotations

from rest_framework.routers import SimpleRouter

from governance.api.views import AuditViewSet, PolicyViewSet, ReviewViewSet

router = SimpleRouter(trailing_slash=False)
router.register("policies", PolicyViewSet, basename="policy")
router.register("reviews", ReviewViewSet, basename="review")
router.register("audit", AuditViewSet, basename="audit")
urlpatterns = router.urls
