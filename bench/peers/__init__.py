"""Peer comparison (``make bench-peers``): other memory libraries on the same LoCoMo data.

Each peer runs in its own virtual environment (``.venv-peers``) through a plain-Python runner
script that prints one JSON object; :mod:`bench.peers.report` prints the side-by-side table.
"""
