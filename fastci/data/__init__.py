"""Data shipped with the package: recorded replays of real repositories (``fastci.data.replay``)."""
