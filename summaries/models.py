"""Models of this app (none yet)."""
