"""Code units of a Python source file: the granularity of evidence and of change analysis.

A unit is a function or method (named by its ``__qualname__``, e.g. ``Model.forward`` or
``outer.<locals>.inner``, as CPython 3.11's ``co_qualname`` spells it), a lambda, a class body
(``Model.<body>``: class attributes, bases, decorators) or the module's own top-level code
(``<module>``). A def's decorators belong to the def: changing ``@torch.no_grad()`` changes what
the function does.

A lambda is a code object of its own, so it is a unit of its own: a change inside
``register("x", lambda a: a + 1)`` selects the tests that called that lambda, not every importer
of the module whose top-level code created it. CPython names every lambda of a scope
``<lambda>``; here the first in a scope is ``scope.<lambda>``, the next ones ``<lambda>#2``,
``<lambda>#3``... in source order, and lambdas that start on one line are one unit (a line is all
that evidence of a frame tells apart). Comprehensions and generator expressions stay part of the
unit they are written in, as before 3.12 inlined them.

Each unit has a *fingerprint*: its AST without positions, without its docstring and without
the bodies of the units nested in it, so moving code, reformatting, editing a comment or a
docstring changes no fingerprint, and editing an inner function does not mark its outer one
modified. (A docstring is code only to a doctest: selection keeps a changed file's doctests.)
"""

from __future__ import annotations

import ast
import bisect
import copy
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
MODULE = "<module>"
BODY = "<body>"


@dataclass(frozen=True, slots=True)
class Unit:
    qualname: str
    first_line: int  # 1-based, the first decorator's line for a decorated def
    last_line: int
    fingerprint: str


class Units:
    """The units of one source file, with line -> innermost unit lookup."""

    def __init__(self, units: list[Unit], exports: frozenset[str] = frozenset()) -> None:
        self.by_name = _merge_redefinitions(units)
        self.exports = exports  # the names of a literal __all__
        # Innermost first on lookup: spans sorted by start; nested spans start later.
        self._module = next((u for u in units if u.qualname == MODULE), None)
        self._spans, self._starts = _spans(u for u in units if u.qualname != MODULE and not is_lambda(u.qualname))
        self._lambda_spans, self._lambda_starts = _spans(u for u in units if is_lambda(u.qualname))

    @classmethod
    def parse(cls, source: str, filename: str = "<source>", fingerprints: bool = True) -> Units:
        """Units of ``source``; raises SyntaxError (with ``filename``) when it does not parse.
        Without ``fingerprints`` (empty) only the spans are known: enough to name the unit of a
        line, as evidence does, at a fraction of the cost (a fingerprint copies its unit's AST)."""
        return cls.of_tree(ast.parse(source, filename=filename), source, filename, fingerprints)

    @classmethod
    def of_tree(cls, tree: ast.Module, source: str, filename: str = "<source>", fingerprints: bool = True) -> Units:
        """Units of ``source`` already parsed into ``tree`` (a caller that walks the tree too)."""
        fingerprint = _fingerprint if fingerprints else _no_fingerprint
        module_code = [node for node in tree.body if not _is_metadata(node)]
        units: list[Unit] = [Unit(MODULE, 1, max(1, len(source.splitlines())), fingerprint(module_code))]
        _collect(tree.body, "", units, is_test_file(filename), fingerprint)
        if LAMBDA_WORD in source:
            _LambdaFinder(units, fingerprint, source).visit(tree)
        return cls(units, _exports(tree.body))

    def unit_at(self, line: int, in_lambda: bool = False) -> str:
        """The qualname of the innermost unit containing ``line`` (a class line outside its
        methods is the class body; a line outside every def and class is module code). A frame
        running a lambda (``in_lambda``) is the innermost lambda there: a def and a lambda can share
        a line (``def f(key=lambda x: x):``), and only the code tells which one runs. A comprehension's
        frame is its enclosing def's, even inside a lambda: a line cannot tell which holds which."""
        if in_lambda:
            found = _innermost(self._lambda_spans, self._lambda_starts, line)
            if found is not None:
                return found
        return _innermost(self._spans, self._starts, line) or MODULE

    def spans(self) -> list[Unit]:
        """The units without fingerprints, each definition of a name on its own, as ``Units`` takes
        them: what evidence needs of a file, to keep (``fastci.evidence.sources``)."""
        found = [self._module] if self._module is not None else []
        return found + [Unit(name, first, last, "") for first, last, name in (*self._spans, *self._lambda_spans)]

    def lambda_at(self, line: int) -> bool:
        """Whether a lambda spans ``line``: then which unit runs there depends on the code."""
        return _innermost(self._lambda_spans, self._lambda_starts, line) is not None


Span = tuple[int, int, str]  # first line, last line, qualname


def _spans(units: Iterable[Unit]) -> tuple[list[Span], list[int]]:
    """Spans sorted by start, nested ones after the spans containing them, and their starts."""
    spans = sorted(((u.first_line, u.last_line, u.qualname) for u in units), key=lambda span: (span[0], -span[1]))
    return spans, [span[0] for span in spans]


def _innermost(spans: list[Span], starts: list[int], line: int) -> str | None:
    # The latest-starting span that contains the line is the innermost one.
    for first, last, name in reversed(spans[: bisect.bisect_right(starts, line)]):
        if first <= line <= last:
            return name
    return None


LAMBDA = "<lambda>"


def is_lambda(qualname: str) -> bool:
    return qualname.rpartition(".")[2].startswith(LAMBDA)


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of ``body`` and of the blocks inside it, at any depth (no expression is
    visited: a fraction of the nodes of a tree)."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody"):
            nested = getattr(node, block, None)
            if isinstance(nested, list):
                yield from statements(nested)
        for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
            yield from statements(part.body)


def is_test_file(path: str) -> bool:
    """pytest's default test files, and conftest.py."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


Fingerprint = Callable[[list[ast.stmt], ast.stmt | None], str]


def _collect(body: list[ast.stmt], prefix: str, units: list[Unit], test_code: bool, fingerprint: Fingerprint) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qualname = f"{prefix}{node.name}"
            units.append(Unit(qualname, _first_line(node), node.end_lineno or node.lineno, fingerprint([node], node)))
            _collect_nested(node.body, f"{qualname}.<locals>.", units, False, fingerprint)
        elif isinstance(node, ast.ClassDef):
            qualname = f"{prefix}{node.name}"
            body_name = f"{qualname}.{BODY}"
            # A test class's methods are tests and fixtures of their own: adding one changes no other
            # test, so a test class body is its attributes, bases and decorators only.
            shape = _without_methods(node) if test_code else node
            units.append(
                Unit(body_name, _first_line(node), node.end_lineno or node.lineno, fingerprint([shape], shape))
            )
            _collect(node.body, f"{qualname}.", units, test_code, fingerprint)
        else:  # defs inside if/try/with blocks keep the scope's prefix
            _collect_nested([node], prefix, units, test_code, fingerprint)


def _collect_nested(
    body: list[ast.stmt], prefix: str, units: list[Unit], test_code: bool, fingerprint: Fingerprint
) -> None:
    """Defs and classes anywhere inside ``body`` (under if/for/try/with), named with ``prefix``."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _collect([node], prefix, units, test_code, fingerprint)
        else:
            # Each child once: visiting body/orelse again on top of iter_child_nodes doubled the
            # work (and the units) per nesting level.
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    _collect_nested([child], prefix, units, test_code, fingerprint)
                elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    _collect_nested(child.body, prefix, units, test_code, fingerprint)


def _merge_redefinitions(units: list[Unit]) -> dict[str, Unit]:
    """One unit per qualname. A name defined twice (a property's getter and setter, a def in
    both branches of an ``if``) is one unit to CPython's ``co_qualname``, so it is one here:
    spanning its definitions, with a fingerprint covering all of them in source order (keeping
    only the last would hide an edit to the getter)."""
    grouped: dict[str, list[Unit]] = {}
    for unit in units:
        grouped.setdefault(unit.qualname, []).append(unit)
    merged = {}
    for name, same in grouped.items():
        if len(same) == 1:
            merged[name] = same[0]
            continue
        digest = hashlib.blake2b("\n".join(u.fingerprint for u in same).encode(), digest_size=12).hexdigest()
        merged[name] = Unit(name, min(u.first_line for u in same), max(u.last_line for u in same), digest)
    return merged


def _without_methods(node: ast.ClassDef) -> ast.ClassDef:
    shape = copy.copy(node)
    shape.body = [child for child in node.body if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return shape


def is_docstring(node: ast.stmt) -> bool:
    """A string literal standing alone: a docstring, which runs no code."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_metadata(node: ast.stmt) -> bool:
    """A module docstring or a literal ``__all__``: runs no code a test could depend on. (Names
    leaving ``__all__`` can break ``import *``; change analysis compares ``exports`` for that.)"""
    return is_docstring(node) or _literal_all(node) is not None


def _literal_all(node: ast.stmt) -> list[str] | None:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
    if not (len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == "__all__"):
        return None
    value = node.value  # type: ignore[union-attr]
    if not isinstance(value, (ast.List, ast.Tuple)):
        return None
    names = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return names if len(names) == len(value.elts) else None


def _exports(body: list[ast.stmt]) -> frozenset[str]:
    return frozenset(name for node in body for name in (_literal_all(node) or ()))


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


LAMBDA_WORD = "lambda"


class _LambdaFinder(ast.NodeVisitor):
    """Adds a unit for each lambda, named in its scope as the module docstring says. It walks only
    the nodes whose lines hold the word ``lambda``: most of a file has none, and a visit of every
    node of a large file costs as much as parsing it."""

    def __init__(self, units: list[Unit], fingerprint: Fingerprint, source: str) -> None:
        self.units, self.fingerprint = units, fingerprint
        self.scope = ""  # the qualname prefix of the scope being visited
        self.count: dict[str, int] = {}  # scope -> lambdas named there
        self.last: dict[str, tuple[int, str]] = {}  # scope -> (line, name) of its latest lambda
        self.lines = [n for n, text in enumerate(source.splitlines(), 1) if LAMBDA_WORD in text]

    def visit(self, node: ast.AST) -> None:
        first = getattr(node, "lineno", None)
        if first is not None:
            at = bisect.bisect_left(self.lines, first)
            if at == len(self.lines) or self.lines[at] > (node.end_lineno or first):  # type: ignore[attr-defined]
                return  # no lambda in its lines
        super().visit(node)

    def _inside(self, prefix: str, nodes: list[ast.AST]) -> None:
        outer, self.scope = self.scope, prefix
        for node in nodes:
            self.visit(node)
        self.scope = outer

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # Decorators, defaults and annotations run in the enclosing scope; the body in the def's own.
        for child in [*node.decorator_list, node.args, *([node.returns] if node.returns else [])]:
            self.visit(child)
        self._inside(f"{self.scope}{node.name}.<locals>.", node.body)

    visit_FunctionDef = visit_AsyncFunctionDef = _def

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for child in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(child)
        self._inside(f"{self.scope}{node.name}.", node.body)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.args)  # defaults run where the lambda is made
        line, last = node.lineno, node.end_lineno or node.lineno
        previous = self.last.get(self.scope)
        if previous is not None and previous[0] == line:
            name = previous[1]  # one line, one unit: a frame's line cannot tell them apart
        else:
            n = self.count[self.scope] = self.count.get(self.scope, 0) + 1
            name = f"{self.scope}{LAMBDA}" + (f"#{n}" if n > 1 else "")
            self.last[self.scope] = (line, name)
        self.units.append(Unit(name, line, last, self.fingerprint([node], node)))  # type: ignore[list-item]
        self._inside(f"{name}.<locals>.", [node.body])


class _StripNested(ast.NodeTransformer):
    """Replace nested defs, classes and lambdas by their names: they are units of their own."""

    def __init__(self, root: ast.AST | None) -> None:
        self.root = root

    def _stub(self, node: ast.AST) -> ast.AST:
        if node is self.root:
            return self.generic_visit(node)
        return ast.Name(id=f"<def {getattr(node, 'name', LAMBDA)}>", ctx=ast.Load())

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _stub


def _no_fingerprint(nodes: list[ast.stmt], unit: ast.stmt | None = None) -> str:
    return ""


def _fingerprint(nodes: list[ast.stmt], unit: ast.stmt | None = None) -> str:
    """Hash of the AST of ``unit`` (or of module code ``nodes``) with nested units stubbed out.
    A class body keeps the names of its methods (adding ``__eq__`` changes the class); module
    code leaves its defs and classes out (a new function changes nothing that ran before)."""
    parts = []
    for node in nodes:
        if unit is None and isinstance(node, _DEFS):
            continue
        copied = copy.deepcopy(node)  # the transformer edits in place; the tree is still walked
        if isinstance(copied, _DEFS) and copied.body and is_docstring(copied.body[0]):
            copied.body = copied.body[1:]
        parts.append(
            ast.dump(_StripNested(copied if unit is not None else None).visit(copied), include_attributes=False)
        )
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=12).hexdigest()
