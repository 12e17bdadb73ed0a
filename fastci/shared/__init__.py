"""Rules and statistics that more than one capability applies, one module per concept.

``perfstats`` (is a run slower than another, from noisy samples), ``owners`` (who owns a path or a
stack layer, from an owner map), ``flakiness`` (what makes a test flaky). They live below the
capabilities that use them so that none reaches into another's folder; they import only
``fastci.core``, ``fastci.inputs`` and ``fastci.contracts``.
"""
