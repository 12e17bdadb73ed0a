"""Planning a selection's run: risk and order (``risk``), and the smallest config that still proves
the change (``workload``). Pure functions; the ``test-plan`` processor applies them."""
