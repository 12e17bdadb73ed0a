"""Heavy libraries imported on first use.

``scipy.stats`` takes most of a second to import, and the processors that compute statistics are
imported by everything that names the topology: every pytest session publishing results or
evidence, every ``fastci`` command. Only the statistics themselves need it.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def scipy_stats() -> Any:
    from scipy import stats

    return stats
