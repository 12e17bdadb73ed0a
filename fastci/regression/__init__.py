"""Regression detection, as pure functions: correctness gates, performance statistics, change points.

Processors in ``fastci.processors`` call these; so can any producer (the qualification runner)
that wants the same verdict locally.
"""
