"""Fleet health: node states, failure and throughput attribution, flaky tests and their owners, test
history; the rules (``rules``, ``slowness``) beside the processors that apply them (what makes a test
flaky is ``fastci.shared.flakiness``, which regression applies too)."""
