"""Fleet health: node states, failure and throughput attribution, flaky tests and their owners, test
history; the rules (``rules``, ``slowness``, ``flakiness``) beside the processors that apply them."""
