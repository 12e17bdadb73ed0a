"""Fault injection for bench/selection_replay.py: one small, deterministic mutation of a function.

A mutant changes one site inside the body of the function named by its ``__qualname__`` (nested
functions and classes are their own units and are left alone):

- ``flip-comparison``: one comparison operator becomes its negation (``<`` -> ``>=``, ``==`` -> ``!=``,
  ``in`` -> ``not in``, ``is`` -> ``is not``, and back);
- ``off-by-one``: one integer constant ``n`` becomes ``n + 1``;
- ``drop-statement``: one statement (not the docstring, not a nested definition) becomes ``pass``.

The edit is made in the source bytes at the node's position, so the rest of the file (comments,
formatting, line numbers) is unchanged. The choice of function, operator and site comes from a
``random.Random`` seeded by the caller (the replay seeds it with the commit sha).
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

NEGATED_COMPARISON: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
OPERATORS = ("flip-comparison", "off-by-one", "drop-statement")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the checkout
    qualname: str
    operator: str
    line: int
    source: bytes  # the whole mutated file
    description: str


def find_function(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The def whose CPython ``__qualname__`` is ``qualname`` (``A.f``, ``f.<locals>.g``)."""

    def walk(body: list[ast.stmt], prefix: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        for node in body:
            if isinstance(node, _DEFINITIONS):
                name = f"{prefix}{node.name}"
                if name == qualname and not isinstance(node, ast.ClassDef):
                    return node
                inner = f"{name}.<locals>." if not isinstance(node, ast.ClassDef) else f"{name}."
                if qualname.startswith(inner):
                    found = walk(node.body, inner)
                    if found is not None:
                        return found
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for block in _blocks(node):  # defs under `if TYPE_CHECKING:`, try/except imports...
                    found = walk(block, prefix)
                    if found is not None:
                        return found
        return None

    return walk(tree.body, "")


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    blocks = [getattr(node, name) for name in ("body", "orelse", "finalbody") if getattr(node, name, None)]
    blocks += [handler.body for handler in getattr(node, "handlers", ())]
    blocks += [case.body for case in getattr(node, "cases", ())]
    return blocks


def _own_nodes(function: ast.AST):
    """Every node in the function's body, not descending into nested defs and classes."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFINITIONS):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _droppable_statements(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    found: list[ast.stmt] = []

    def visit(block: list[ast.stmt], is_function_body: bool) -> None:
        for index, statement in enumerate(block):
            docstring = (
                is_function_body
                and index == 0
                and isinstance(statement, ast.Expr)
                and isinstance(getattr(statement, "value", None), ast.Constant)
                and isinstance(statement.value.value, str)
            )
            if isinstance(statement, _DEFINITIONS) or docstring:
                continue
            found.append(statement)
            for inner in _blocks(statement):
                visit(inner, False)

    visit(function.body, True)
    return found


def _sites(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[tuple[ast.AST, int]]]:
    """(node, detail) per operator: detail is the index of the operator in a comparison."""
    own = list(_own_nodes(function))
    compare = [
        (n, i)
        for n in own
        if isinstance(n, ast.Compare)
        for i, op in enumerate(n.ops)
        if type(op) in NEGATED_COMPARISON
    ]
    integers = [(n, 0) for n in own if isinstance(n, ast.Constant) and type(n.value) is int]
    statements = [(s, 0) for s in _droppable_statements(function)]
    sites = {"flip-comparison": compare, "off-by-one": integers, "drop-statement": statements}
    return {operator: found for operator, found in sites.items() if found}


class _Offsets:
    """Byte offsets of (line, utf-8 column) positions, as ast reports them."""

    def __init__(self, source: bytes) -> None:
        self.starts = [0]
        for line in source.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.starts[node.lineno - 1] + node.col_offset, self.starts[node.end_lineno - 1] + node.end_col_offset)


def _replacement(operator: str, node: ast.AST, detail: int, source: bytes, offsets: _Offsets) -> tuple[bytes, str]:
    start, end = offsets.span(node)
    original = source[start:end].decode()
    if operator == "off-by-one":
        return str(node.value + 1).encode(), f"{original} -> {node.value + 1}"
    if operator == "drop-statement":
        return b"pass", f"dropped `{original.splitlines()[0][:60]}`"
    ops = list(node.ops)
    ops[detail] = NEGATED_COMPARISON[type(ops[detail])]()
    mutated = ast.unparse(ast.Compare(left=node.left, ops=ops, comparators=node.comparators))
    return mutated.encode(), f"`{original[:60]}` -> `{mutated[:60]}`"


def make_mutant(source: bytes, path: str, qualname: str, rng: random.Random) -> Mutant | None:
    """One mutant of ``qualname`` in ``source`` that still compiles, or None (no site, no def)."""
    tree = ast.parse(source)
    function = find_function(tree, qualname)
    if function is None:
        return None
    sites = _sites(function)
    offsets = _Offsets(source)
    operators = [op for op in OPERATORS if op in sites]
    rng.shuffle(operators)
    for operator in operators:
        candidates = list(sites[operator])
        rng.shuffle(candidates)
        for node, detail in candidates[:5]:
            text, description = _replacement(operator, node, detail, source, offsets)
            start, end = offsets.span(node)
            mutated = source[:start] + text + source[end:]
            try:
                compile(mutated, path, "exec")
            except SyntaxError:
                continue
            if mutated != source:
                return Mutant(path, qualname, operator, node.lineno, mutated, description)
    return None
