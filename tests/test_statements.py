"""Module code by statement: which names a changed top-level statement re-binds, and which
statements cannot be bounded by names (their effect at import may reach anything)."""

from __future__ import annotations

import pytest

from fastci.selection.statements import changed_names, readers

BASE = """import math
from itertools import chain

__all__ = ["take", "spread"]

LIMIT = 10
_marker = object()


def take(n, it):
    return list(chain(it))[:n]


def spread(xs):
    return max(xs) - min(xs) if len(xs) < LIMIT else math.inf
"""


@pytest.mark.parametrize(
    ("edit", "names", "assigned"),
    [
        (("LIMIT = 10", "LIMIT = 12"), {"LIMIT"}, {"LIMIT"}),
        (
            ("_marker = object()", "_marker = object()\n_isqrt = getattr(math, 'isqrt', lambda x: int(x**0.5))"),
            {"_isqrt"},
            {"_isqrt"},
        ),
        (("LIMIT = 10", "LIMIT = 10\n_WORD = re.compile(r'\\w+')"), {"_WORD"}, {"_WORD"}),
        (
            ("LIMIT = 10", "LIMIT = 10\n_sumprod = getattr(math, 'sumprod', lambda x, y: dot(x, y))"),
            {"_sumprod"},
            {"_sumprod"},
        ),
        (("from itertools import chain", "from itertools import chain, islice"), {"chain", "islice"}, set()),
        (('"spread"]', '"spread", "LIMIT"]'), {"LIMIT"}, {"LIMIT"}),
    ],
)
def test_a_binding_statement_re_binds_just_its_names(edit, names, assigned):
    assert changed_names(BASE, BASE.replace(*edit)) == (names, assigned)


@pytest.mark.parametrize(
    "edit",
    [
        ("LIMIT = 10", "LIMIT = load_limit()"),  # a call of the project's: may do anything at import
        ("LIMIT = 10", "LIMIT = registry.register(10)"),  # a registration
        ("LIMIT = 10", "LIMIT = getattr(math, 'inf', load_limit())"),  # a default is evaluated
        ("LIMIT = 10", "LIMIT = 10\nprint('imported')"),  # not a binding
        ("LIMIT = 10", "for i in range(3):\n    LIMIT = i"),
        ('__all__ = ["take", "spread"]', "__all__ = [n for n in dir() if not n.startswith('_')]"),
    ],
)
def test_a_statement_whose_effect_names_do_not_bound_is_module_code(edit):
    assert changed_names(BASE, BASE.replace(*edit)) is None


def test_the_units_that_read_a_name_are_its_readers():
    assert readers(BASE, {"LIMIT"}) == {"spread"}
    assert readers(BASE, {"chain"}) == {"take"}


def test_readers_are_named_as_evidence_names_units():
    source = """X = 1
try:
    from fast import thing
except ImportError:
    def fallback():
        return X


def outer():
    def inner():
        return X

    return inner
"""
    # a def under try/except reads too; an inner function is not also its outer one
    assert readers(source, {"X"}) == {"fallback", "outer.<locals>.inner"}
    # top-level code that loads the name computes with it: the module's code reads it
    assert readers(source + "Y = X + 1\n", {"X"}) == {"<module>", "fallback", "outer.<locals>.inner"}
