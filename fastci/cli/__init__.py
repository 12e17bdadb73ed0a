"""The ``fastci`` command line: ``main`` builds the parser, one module per command group, ``base`` shares the
helpers (consoles, usage errors, Kafka settings, views)."""
