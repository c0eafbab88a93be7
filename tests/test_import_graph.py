"""opgen's modules import each other in one direction: no import cycle, however it is hidden.

The graph is read from the source (``ast``), not by importing anything: every ``import`` and
``from ... import`` of every module under ``opgen/``, at module level and inside functions,
classes and ``try`` blocks alike (an import inside a function is still an arrow; it only runs
later). Only imports under ``if TYPE_CHECKING:`` are left out: they never run. ``from . import
x`` where ``x`` is a submodule is an arrow to that submodule; any other name is an arrow to the
module it comes from. A cycle is a strongly connected component of more than one module, or a
module importing itself.

No compiler, no framework: a fraction of a second.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "opgen"


def modules(root: Path = ROOT, package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Every module under ``package``: dotted name -> (file, whether it is a package's ``__init__``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree``, at any depth, except those under ``if TYPE_CHECKING:``
    (their ``else:`` branch counts)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for node in child.orelse:
                yield from _imports(ast.Module(body=[node], type_ignores=[]))
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        else:
            yield from _imports(child)


def _known(name: str, known: Mapping[str, object]) -> str | None:
    """``name`` or the closest enclosing module that is one of ``known`` (``opgen.x.y`` -> ``opgen.x``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path = ROOT, package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: line of the first such import}, within ``package``."""
    known = modules(root, package)
    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in known.items():
        edges: dict[str, int] = {}
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
            for target in targets:
                found = _known(target, known)
                if found is not None:
                    edges.setdefault(found, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` that are cycles (Tarjan's algorithm,
    iterative), each sorted, in order of their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, {}):
                    found.append(sorted(component))
    return sorted(found)


def describe(component: list[str], graph: Mapping[str, Mapping[str, int]], root: Path = ROOT,
             package: Path = PACKAGE) -> str:
    """The arrows inside one cycle, each with the importing line: what to look at to break it."""
    files = modules(root, package)
    lines = [f"{len(component)} modules:"]
    for module in component:
        for target, line in sorted(graph[module].items()):
            if target in component:
                where = files[module][0].relative_to(root).as_posix()
                lines.append(f"  {module} -> {target}  ({where}:{line})")
    return "\n".join(lines)


def test_opgen_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 40  # the walk found opgen's modules
    found = cycles(graph)
    assert not found, "import cycles among opgen's modules:\n" + "\n".join(describe(c, graph) for c in found)


def test_the_walk_sees_hidden_and_relative_imports(tmp_path: Path) -> None:
    """The checker itself: an import inside a function closes a cycle, ``from . import x``
    reaches the submodule, and ``if TYPE_CHECKING:`` imports do not count."""
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (pkg / "c.py").write_text("import p.a\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import e\n")
    (pkg / "e.py").write_text("try:\n    from .d import x\nexcept ImportError:\n    pass\n")
    graph = import_graph(tmp_path, pkg)
    assert graph["p.a"] == {"p.sub.b": 1} and graph["p.sub.b"] == {"p.c": 2} and graph["p.c"] == {"p.a": 1}
    assert graph["p.d"] == {} and graph["p.e"] == {"p.d": 2}
    assert cycles(graph) == [["p.a", "p.c", "p.sub.b"]]
    assert "p.sub.b -> p.c  (p/sub/b.py:2)" in describe(["p.a", "p.c", "p.sub.b"], graph, tmp_path, pkg)
