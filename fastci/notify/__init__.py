"""Consumers that tell people about decisions: they read topics and do I/O, so they are not processors.

``tickets`` opens a ticket per regression whose bisect ended (files, signed webhook posts), reading
``regression-alert`` from the embedded log or Kafka; it sits above the runtimes it reads through.
"""
