"""Django's PostgreSQL backend, with a health check that costs no round trip; and the
web workers' statement time limit (:func:`web_statement_timeout`).

With ``CONN_HEALTH_CHECKS`` on, Django checks a kept connection before its first use in each
request, and so before each search job's and each piece of deferred work's transaction, with
``SELECT 1``: a round trip, 0.65 ms at p50 of a REST search of the 100k bench tenant on the
2-core machine (``docs/performance.md``, "REST overhead of a search"). It is what lets the
first request after a database restart succeed.

A connection that the server closed while it sat idle (a restart, ``pg_terminate_backend``,
``idle_session_timeout``) has something to read: the server's ``FATAL`` message and the end
of the stream. So :meth:`DatabaseWrapper.is_usable` answers "usable" without a query when
the connection is idle, not broken, and its socket has nothing waiting; in every other case
(data waiting, a transaction open or failed, a broken or closed connection, no ``poll`` on
the platform) it asks the server as Django does.
"""

from __future__ import annotations

import select
from typing import Any

from django.conf import settings
from django.db.backends.postgresql import base
from psycopg import pq

from memory_project.env import web_process


def socket_quiet(fd: int) -> bool:
    """Whether socket ``fd`` has nothing to read right now (``poll`` with no timeout).

    Raises:
        OSError: ``fd`` is not an open descriptor.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return not poller.poll(0)


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL ``DatabaseWrapper`` with the cheaper :meth:`is_usable`."""

    def is_usable(self) -> bool:
        """``True`` when the connection can run a statement.

        An idle, unbroken connection whose socket has nothing to read is usable without a
        round trip; otherwise Django's ``SELECT 1`` decides."""
        conn = self.connection
        if (conn is not None and hasattr(select, "poll") and not conn.closed
                and not conn.broken
                and conn.info.transaction_status == pq.TransactionStatus.IDLE):
            try:
                if socket_quiet(conn.fileno()):
                    return True
            except OSError:
                return False
        return bool(super().is_usable())


def web_statement_timeout(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: in a web worker (``MEMORY_WEB_PROCESS``, set by
    ``memory_project.wsgi``), a new connection gets ``statement_timeout`` =
    ``DATABASE_STATEMENT_TIMEOUT_MS`` for its session (one round trip per connection), so
    no statement of a request runs longer; a cancelled one answers 422
    ``WORK_BUDGET_EXCEEDED`` (``memory_project.errors``). Celery workers and commands keep
    PostgreSQL's default (none): their statements may be long by design."""
    timeout = settings.DATABASE_STATEMENT_TIMEOUT_MS
    if timeout <= 0 or not web_process():
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, false)", [str(timeout)])
