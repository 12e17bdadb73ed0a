"""Regression detection: correctness gates, change points, baselines, bisect and tickets (the
performance statistics are ``fastci.shared.perfstats``, which the fleet applies too). The policy
modules are pure functions; the processors here (``detector``, ``correctness_gates``,
``baseline_guard``, ``bisect_planner``, ``bisect``) call them, and so can any producer (the
qualification runner) that wants the same verdict locally.
"""
