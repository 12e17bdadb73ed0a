"""Reproducibility: ``fastci rerun`` turns a past result into a run request for the same run, and
``fastci runner`` executes run requests for the qualification set on the emulated accelerator."""
