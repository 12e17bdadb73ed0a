"""The CI loop: a job asks fastci for its change's plan and runs just that (``pytest --fastci-select``,
``fastci plan``). It reads the decisions the processors publish; it holds no decision logic itself."""
