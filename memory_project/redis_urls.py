"""Redis URLs as redis-py and Celery's transport (kombu) spell them.

redis-py takes ``redis://host:port/N`` and ``unix:///path/redis.socket?db=N``; kombu spells a
Unix socket ``redis+socket:///path/redis.socket`` and its database ``?virtual_host=N``.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def kombu_url(url: str) -> str:
    """``url`` (a redis-py URL) as Celery's broker URL: a Unix socket becomes
    ``redis+socket://`` with its ``db`` as ``virtual_host``; TCP URLs are unchanged."""
    if not url.startswith("unix://"):
        return url
    parts = urlsplit(url)
    query = urlencode([("virtual_host" if key == "db" else key, value)
                       for key, value in parse_qsl(parts.query)])
    return f"redis+socket://{parts.path}" + (f"?{query}" if query else "")


def with_database(url: str, db: int) -> str:
    """``url`` pointing at Redis logical database ``db`` (0..15 on a default server).

    Raises:
        ValueError: ``db`` out of 0..15.
    """
    if not 0 <= db <= 15:
        raise ValueError(f"Redis database {db} is not in 0..15.")
    parts = urlsplit(url)
    if parts.scheme == "unix":
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "db"] + [("db", str(db))]
        return f"unix://{parts.path}?{urlencode(query)}"
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, ""))
