"""``manage.py vector_health``: health, capabilities and circuit of the configured vector
backend, as JSON; exits non-zero when it is unhealthy."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from vectors.selectors import backend_status


class Command(BaseCommand):
    help = ("Check the configured vector backend (VECTOR_BACKEND or vector.backend): prints "
            "its health (latency or error details), capabilities and circuit breaker state.")

    def handle(self, *args: Any, **options: Any) -> None:
        status = backend_status()
        self.stdout.write(json.dumps(status, indent=2))
        if status["status"] != "healthy":
            raise CommandError(f"{status['backend']} is unhealthy: {status.get('details')}")
