"""The vectors app stores nothing of its own: vectors live in the configured backend, and
the memories table is the system of record."""
