"""Scheduling policy: pure functions the pool-scheduler processor calls."""
