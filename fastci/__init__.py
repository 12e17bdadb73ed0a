"""fastci: the CI brain for GPU-heavy test suites."""
