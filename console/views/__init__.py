"""Console pages, one module per area; every tenant page goes through
:func:`console.access.console_view`."""
