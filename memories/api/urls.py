from __future__ import annotations

from rest_framework.routers import SimpleRouter

from memories.api.views import MemoryViewSet

router = SimpleRouter(trailing_slash=False)
router.register("memories", MemoryViewSet, basename="memory")
urlpatterns = router.urls
