"""Fleet health: the rules behind node states, failure and throughput attribution, flaky tests, and
the fleet simulation. The processors that apply them live in ``fastci/<capability>/``."""
