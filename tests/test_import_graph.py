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
            "skiplock._lanes",
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
            "skiplock._typed",
            "skiplock._job_log",
        ),
    ),
    (
        "storage",  # the backends and what reads through them
        (
            "skiplock._backends",
            "skiplock._sqlalchemy",
            "skiplock._waiting",
            "skiplock._schema",
            "skiplock._app_databases",
            "skiplock._app_merged",
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


# -- storage: two dialects under a shared layer (issue 45) -------------------------------------

BACKENDS = "skiplock._backends"
DIALECTS = ("postgres", "sqlite")
"""The dialects under ``skiplock._backends``: a module belongs to one when its first name
there is the dialect's (``postgres``, the package, and everything under it) or starts with it
(today's flat ``postgres_*`` and ``sqlite_*`` modules), so the rules hold on both layouts."""


def dialect_of(module: str) -> str | None:
    """The dialect ``module`` belongs to; None for the shared layer (every other module of
    ``skiplock._backends``, the package itself included) and for modules outside storage."""
    if not module.startswith(BACKENDS + "."):
        return None
    first = module[len(BACKENDS) + 1 :].split(".")[0]
    return next((d for d in DIALECTS if first.startswith(d)), None)


def is_shared(module: str) -> bool:
    """Whether ``module`` is in the shared layer of ``skiplock._backends``."""
    inside = module == BACKENDS or module.startswith(BACKENDS + ".")
    return inside and dialect_of(module) is None


def dialects_crossing(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every import from one dialect's module into the other's."""
    return sorted(
        (module, dep)
        for module, deps in graph.items()
        for dep in deps
        if dialect_of(module) is not None
        and dialect_of(dep) is not None
        and dialect_of(module) != dialect_of(dep)
    )


def shared_to_dialect(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every import from the shared layer into a dialect. (``registry.py`` names the dialects'
    modules as strings for importlib: that is no import, and an SQLite app never loads
    PostgreSQL's.)"""
    return sorted(
        (module, dep)
        for module, deps in graph.items()
        for dep in deps
        if is_shared(module) and dialect_of(dep) is not None
    )


def test_the_dialects_never_import_each_other() -> None:
    graph = import_graph()
    assert {dialect_of(m) for m in graph} >= {"postgres", "sqlite"}
    assert dialects_crossing(graph) == []


def test_a_dialect_importing_the_other_would_be_found() -> None:
    graph = {
        # the flat layout
        "skiplock._backends.postgres": {"skiplock._backends.postgres_url"},
        "skiplock._backends.postgres_ops": {"skiplock._backends.sqlite_ops"},
        "skiplock._backends.sqlite_keys": {"skiplock._backends.postgres"},
        # the packaged layout
        "skiplock._backends.postgres.claim": {
            "skiplock._backends.postgres.rows",
            "skiplock._backends.sqlite.storage.wal",
        },
        "skiplock._backends.sqlite": {"skiplock._backends.sqlite.backend"},
        "skiplock._backends.sqlite.backend": {"skiplock._backends.postgres.url"},
        # the shared layer is not a dialect
        "skiplock._backends.flows": {"skiplock._backends.protocol"},
    }
    assert dialects_crossing(graph) == [
        ("skiplock._backends.postgres.claim", "skiplock._backends.sqlite.storage.wal"),
        ("skiplock._backends.postgres_ops", "skiplock._backends.sqlite_ops"),
        ("skiplock._backends.sqlite.backend", "skiplock._backends.postgres.url"),
        ("skiplock._backends.sqlite_keys", "skiplock._backends.postgres"),
    ]


def test_the_shared_layer_imports_no_dialect() -> None:
    graph = import_graph()
    assert is_shared("skiplock._backends.registry") and "skiplock._backends.registry" in graph
    assert shared_to_dialect(graph) == []


def test_a_shared_module_importing_a_dialect_would_be_found() -> None:
    source = "from .sqlite import SQLiteBackend\nfrom . import postgres_url\n"
    known = {
        "skiplock._backends.flows",
        "skiplock._backends.sqlite",
        "skiplock._backends.postgres_url",
    }
    graph = {
        "skiplock._backends": {"skiplock._backends.postgres.backend"},
        "skiplock._backends.flows": imports_of(source, "skiplock._backends.flows", False, known),
        "skiplock._backends.protocol": {"skiplock._backends.params", "skiplock._job"},
        "skiplock._backends.postgres.backend": {"skiplock._backends.protocol"},
        "skiplock._enqueue": {"skiplock._backends.sqlite"},  # above storage: another rule's
    }
    assert shared_to_dialect(graph) == [
        ("skiplock._backends", "skiplock._backends.postgres.backend"),
        ("skiplock._backends.flows", "skiplock._backends.postgres_url"),
        ("skiplock._backends.flows", "skiplock._backends.sqlite"),
    ]


KNOWN_ABOVE_STORAGE: set[tuple[str, str]] = {("skiplock.contrib.django.admin", "postgres")}
"""Modules above storage that import a dialect's module, and which dialect: the Django admin
reads the schema of a PostgreSQL URL (``parse_postgres_url``) to tell which backend's jobs it
shows. Everything else asks the protocol (``Backend.inserts_here`` and the like) or the
registry (issue 45)."""


def above_storage_to_dialect(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every import of a dialect's module from outside ``skiplock._backends``, as (module,
    dialect), so the rule reads the same on the flat layout and the packaged one."""
    return sorted(
        {
            (module, dialect)
            for module, deps in graph.items()
            if module != BACKENDS and not module.startswith(BACKENDS + ".")
            for dep in deps
            if (dialect := dialect_of(dep)) is not None
        }
    )


def test_above_storage_only_known_modules_import_a_dialect() -> None:
    assert set(above_storage_to_dialect(import_graph())) - KNOWN_ABOVE_STORAGE == set()


def test_a_dialect_imported_above_storage_would_be_found() -> None:
    graph = {
        "skiplock._enqueue": {"skiplock._backends.sqlite", "skiplock._backends.protocol"},
        "skiplock._worker.services": {"skiplock._backends.postgres.storage.rotation"},
        "skiplock._backends.registry": {"skiplock._backends.protocol"},
    }
    assert above_storage_to_dialect(graph) == [
        ("skiplock._enqueue", "sqlite"),
        ("skiplock._worker.services", "postgres"),
    ]
