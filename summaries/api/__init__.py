"""The REST API of the summaries app: layer summaries and context assembly."""
