"""Module code by statement: a changed top-level statement that only binds names (an assignment, an
import) changes what the code that reads those names does, and nothing else; the units that read
them stand in for the module's ``<module>`` code.

A literal ``__all__`` that gains or loses names re-binds just those names in every module that
imports it with ``*``: the units that read them stand in too. A class that only gains or loses
methods, or is deleted, is a re-bound name as well, its methods changed or deleted with it. A
statement that does more at import (a call with side effects, a registration, a loop, a
conditional) is not bounded that way: then the module's code counts as changed, as before, and
every test whose imports reach it runs.
"""

from __future__ import annotations

import ast

from fastci.selection.units import MODULE, Units, is_docstring

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def changed_names(old: str, new: str) -> tuple[set[str], set[str]] | None:
    """The names bound by the top-level statements that differ between two versions of a module,
    and of those the ones bound by assignment (what another module may import), or None when one
    of the statements is not a plain binding (its effect cannot be bounded by names)."""
    before, after = _statements(old), _statements(new)
    changed = [s for s in before if s not in after] + [s for s in after if s not in before]
    names: set[str] = set()
    assigned: set[str] = set()
    exports = [_exports(ast.parse(text).body[0]) for _, text in changed]
    if any(e is not None for e in exports):
        old_all, new_all = _all_of(old), _all_of(new)
        if old_all is None or new_all is None:
            return None  # a computed __all__: what import * brings cannot be bounded
        names |= old_all ^ new_all
        assigned |= old_all ^ new_all
        changed = [c for c, e in zip(changed, exports) if e is None]
    for _, text in changed:
        node = ast.parse(text).body[0]
        bound = _bound(node)
        if bound is None:
            return None
        names |= bound
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            assigned |= bound
    return names, assigned


def readers(source: str, names: set[str]) -> set[str]:
    """Qualnames of the units of ``source`` that read one of ``names``, as a name or as an attribute
    (``module.NAME``), named as evidence names them: the innermost unit of the line (``Units``), so
    a def under ``try``/``if`` counts and an inner function is not also its outer one. ``<module>``
    when the module's own top-level code loads one (its bindings of them are not reads)."""
    tree = ast.parse(source)
    units = Units.of_tree(tree, source, fingerprints=False)
    augmented = {id(node.target) for node in ast.walk(tree) if isinstance(node, ast.AugAssign)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if not (
            (isinstance(node, ast.Name) and node.id in names)
            or (isinstance(node, ast.Attribute) and node.attr in names)
        ):
            continue
        unit = units.unit_at(node.lineno)
        if unit != MODULE or isinstance(node.ctx, ast.Load) or id(node) in augmented:
            found.add(unit)
    return found


def methods_only(old: str, new: str, class_qualname: str) -> set[str] | None:
    """For a class whose change only adds or removes methods (its bases, keywords, decorators and
    other statements alike; a method each version at least), the qualnames of its methods in the
    old version: code that uses the class runs one of them or names the class. None otherwise:
    then the class body counts as changed module code, as before."""
    before, after = _class(old, class_qualname), _class(new, class_qualname)
    if before is None or after is None or before.decorator_list or after.decorator_list:
        return None  # a class decorator may register the class: its users need not name it
    if _shape(before) != _shape(after):
        return None
    methods = {n.name for n in before.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if not methods or not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in after.body):
        return None
    return {f"{class_qualname}.{name}" for name in methods}


def removed_class(old: str, class_qualname: str) -> set[str] | None:
    """For a deleted class with no decorator and a method at least, the qualnames of its methods
    (deleted with it); None otherwise."""
    before = _class(old, class_qualname)
    if before is None or before.decorator_list:
        return None
    methods = {n.name for n in before.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return {f"{class_qualname}.{name}" for name in methods} or None


def _class(source: str, qualname: str) -> ast.ClassDef | None:
    """The class ``A.B`` of a module (classes nested in classes; not in functions)."""
    body: list[ast.stmt] = ast.parse(source).body
    found: ast.ClassDef | None = None
    for name in qualname.split("."):
        found = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == name), None)
        if found is None:
            return None
        body = found.body
    return found


def _shape(node: ast.ClassDef) -> list[str]:
    """A class without its methods: bases, keywords, the other statements of its body."""
    parts = [ast.dump(b, include_attributes=False) for b in (*node.bases, *node.keywords)]
    return parts + [
        ast.dump(n, include_attributes=False)
        for n in node.body
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not is_docstring(n)
    ]


def _statements(source: str) -> list[tuple[str, str]]:
    """Top-level statements that are not defs or classes (those are units of their own), each as
    (its AST dump without positions, its source)."""
    tree = ast.parse(source)
    return [
        (ast.dump(node, include_attributes=False), ast.get_source_segment(source, node) or ast.unparse(node))
        for node in tree.body
        if not isinstance(node, _DEFS) and not is_docstring(node)
    ]


def _bound(node: ast.stmt) -> set[str] | None:
    """The names a plain binding statement binds; None for any other statement."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names if alias.name != "*"} or None
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets, value = node.targets, node.value
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets, value = [node.target], node.value
    else:
        return None
    names = set()
    for target in targets:
        if not isinstance(target, ast.Name) or target.id == "__all__":
            return None
        names.add(target.id)
    if value is not None and _calls(value):
        return None  # a value computed by a call may do anything at import
    return names


def _exports(node: ast.stmt) -> list[str] | None:
    """The names of a literal ``__all__`` assignment (or augmentation); None for any other statement."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = node.value
            if isinstance(value, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
            ):
                return [e.value for e in value.elts]
            return []  # computed: the caller finds out from the whole module
    return None


def _all_of(source: str) -> set[str] | None:
    """A module's exported names when every ``__all__`` statement is a literal (``+=`` adds)."""
    found: set[str] = set()
    for node in ast.parse(source).body:
        names = _exports(node)
        if names is None:
            continue
        value = node.value  # type: ignore[attr-defined]
        if not (isinstance(value, (ast.List, ast.Tuple)) and len(names) == len(value.elts)):
            return None
        found = found | set(names) if isinstance(node, ast.AugAssign) else set(names)
    return found


# Calls a module's bindings commonly make that only compute their value (no registration, no
# global state): ``_marker = object()``, ``_isqrt = getattr(math, 'isqrt', fallback)``,
# ``_WORD = re.compile(...)``. Anything else called at import may do anything.
_PURE_CALLS = frozenset(
    {
        *("frozenset", "set", "tuple", "list", "dict", "int", "float", "str", "bytes", "bool", "complex"),
        *("range", "len", "object", "getattr", "hasattr", "isinstance", "issubclass", "sorted", "reversed"),
        *("min", "max", "sum", "abs", "round", "divmod", "pow", "ord", "chr", "repr", "any", "all"),
        *("zip", "map", "filter", "enumerate", "iter", "slice"),
        *("namedtuple", "TypeVar", "NewType", "ParamSpec", "partial", "itemgetter", "attrgetter", "methodcaller"),
        *("re.compile", "collections.namedtuple", "typing.TypeVar", "typing.NewType", "typing.ParamSpec"),
        *("functools.partial", "operator.itemgetter", "operator.attrgetter", "operator.methodcaller"),
        *("logging.getLogger", "math.sqrt", "math.log", "math.exp", "math.pow", "math.isqrt", "math.ceil"),
        "math.floor",
    }
)


def _calls(node: ast.AST) -> bool:
    """Whether evaluating ``node`` calls something other than a few pure functions (``_PURE_CALLS``);
    a lambda's body is not evaluated."""
    pending = [node]
    while pending:
        child = pending.pop()
        if isinstance(child, ast.Call) and _dotted(child.func) not in _PURE_CALLS:
            return True
        if isinstance(child, ast.Lambda):
            pending += child.args.defaults + [d for d in child.args.kw_defaults if d is not None]
            continue
        pending += ast.iter_child_nodes(child)
    return False


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a name or an attribute chain on a name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None
