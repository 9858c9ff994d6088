"""Django's PostgreSQL backend with a health check that costs no round trip, and the web
workers' statement time limit (``base``)."""
