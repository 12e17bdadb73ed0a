"""Release bundles in git: an environment's desired state as files, promoted through gates, rolled back by revert."""
