"""The import graph of ``src/skiplock``: no circle, and no arrow from a lower layer up
(issues 10 and 23).

Every import counts: at module level, inside a function, and under ``if TYPE_CHECKING:``
(an annotation names a module as surely as a call does: two modules that name each other
cannot be understood one before the other). A circle means two modules cannot be understood,
or loaded, one before the other; an upward import means a lower layer knows one above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import skiplock

ROOT = Path(skiplock.__file__).parent

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "records",  # values, limits and errors: they know nothing of storage
        (
            "skiplock.errors",
            "skiplock._limits",
            "skiplock._url",
            "skiplock._cron",
            "skiplock._config",
            "skiplock._outcomes",
            "skiplock._payload",
            "skiplock._printable",
            "skiplock._logging",
            "skiplock._job",
            "skiplock._attempt",
            "skiplock._transitions",
            "skiplock._handback",
            "skiplock._service",
            "skiplock._outage",
            "skiplock._workflow_records",
            "skiplock._durable",
            "skiplock._task_options",
        ),
    ),
    (
        "storage",  # the backends and what reads through them
        (
            "skiplock._backends",
            "skiplock._sqlalchemy",
            "skiplock._waiting",
            "skiplock._schema",
        ),
    ),
    (
        "app parts",  # the registry a worker runs by, and the parts App composes
        (
            "skiplock._task",
            "skiplock._schedule",
            "skiplock._tracing",
            "skiplock._registry",
            "skiplock._eager",
            "skiplock._enqueue",
            "skiplock._app_control",
            "skiplock._app_observe",
            "skiplock._app_results",
            "skiplock._app_workflows",
            "skiplock._workflow",
            "skiplock._batch",
            "skiplock._observe",
        ),
    ),
    (
        "worker",  # the worker and its services get the registry and a backend, never the App
        ("skiplock._worker",),
    ),
    ("app", ("skiplock._app",)),  # the facade
    (
        "edges",  # what users import and run
        (
            "skiplock",
            "skiplock.__main__",
            "skiplock.testing",
            "skiplock.contrib",
            "skiplock.dashboard",
            "skiplock._cli",
            "skiplock.otel",
            "skiplock.prometheus",
        ),
    ),
)

KNOWN_UPWARD: set[tuple[str, str]] = set()
"""None left: the worker receives its metrics exporter (``_observe.plugins``; the edge
registers Prometheus), so it no longer imports ``skiplock.prometheus`` (issue 23)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class Imports(ast.NodeVisitor):
    """The skiplock modules one module imports, wherever the import statement stands."""

    def __init__(self, name: str, is_package: bool, known: set[str]) -> None:
        self.package = name if is_package else name.rpartition(".")[0]
        self.known = known
        self.found: set[str] = set()

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


def imports_of(source: str, name: str, is_package: bool, known: set[str]) -> set[str]:
    visitor = Imports(name, is_package, known)
    visitor.visit(ast.parse(source))
    return visitor.found - {name}


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    known = set(paths)
    return {
        name: imports_of(path.read_text(), name, path.name == "__init__.py", known)
        for name, path in paths.items()
    }


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


def layer_of(module: str, layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS) -> int:
    """The index of the layer whose longest prefix names ``module``; KeyError if none."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            named = module == prefix or module.startswith(prefix + ".")
            if named and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    if best is None:
        raise KeyError(f"{module} is in no layer: add it to LAYERS")
    return best[1]


def upward(
    graph: dict[str, set[str]], layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS
) -> list[tuple[str, str]]:
    """Every import from a module to one in a higher layer."""
    return sorted(
        (module, dep)
        for module, deps in graph.items()
        for dep in deps
        if layer_of(dep, layers) > layer_of(module, layers)
    )


def test_the_import_graph_has_no_circle() -> None:
    graph = import_graph()
    assert graph.get("skiplock._worker.worker")
    assert circles(graph) == []


def test_a_circle_would_be_found() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_an_import_under_type_checking_counts() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n"
    graph = {
        "p.a": imports_of(source, "p.a", False, {"p.a", "p.b"}),
        "p.b": imports_of("from .a import A\n", "p.b", False, {"p.a", "p.b"}),
    }
    assert graph["p.a"] == {"p.b"}
    assert circles(graph) == [["p.a", "p.b", "p.a"]]


def test_every_module_is_in_a_layer() -> None:
    for module in import_graph():
        layer_of(module)


def test_no_module_imports_a_higher_layer() -> None:
    assert set(upward(import_graph())) - KNOWN_UPWARD == set()


def test_an_upward_import_would_be_found() -> None:
    layers = (("low", ("p.low",)), ("high", ("p.high", "p.low.special")))
    graph = {"p.low.x": {"p.high"}, "p.high": {"p.low.x"}, "p.low.special": {"p.low.x"}}
    assert upward(graph, layers) == [("p.low.x", "p.high")]
