"""The import graph of ``src/skiplock`` has no circle (issue 10).

Every import counts, at module level or inside a function, except those under
``if TYPE_CHECKING:`` (annotations only: ``_task.py`` names ``App`` that way). A circle means
two modules cannot be understood, or loaded, one before the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import skiplock

ROOT = Path(skiplock.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class Imports(ast.NodeVisitor):
    """The skiplock modules one module imports, TYPE_CHECKING blocks left out."""

    def __init__(self, name: str, is_package: bool, known: set[str]) -> None:
        self.package = name if is_package else name.rpartition(".")[0]
        self.known = known
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found |= {a.name for a in node.names if a.name in self.known}

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        for alias in node.names:
            full = f"{base}.{alias.name}"
            target = full if full in self.known else base
            if target in self.known:
                self.found.add(target)


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    known = set(paths)
    graph = {}
    for name, path in paths.items():
        visitor = Imports(name, path.name == "__init__.py", known)
        visitor.visit(ast.parse(path.read_text()))
        graph[name] = visitor.found - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}
    path: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                found.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                walk(dep)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module)
    return found


def test_the_import_graph_has_no_circle() -> None:
    graph = import_graph()
    assert graph.get("skiplock._worker.worker")
    assert circles(graph) == []


def test_a_circle_would_be_found() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
