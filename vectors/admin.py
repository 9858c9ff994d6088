"""Nothing to administer: the vectors app has no models."""
