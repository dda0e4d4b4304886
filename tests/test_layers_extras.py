"""The core never imports an extra; an extra never imports the worker's internals (issue 23).

Walks the AST of every module of ``src/skiplock`` (imports at module level, inside functions
and under ``TYPE_CHECKING`` all count):

- the **core** (everything but the plug-ins below) imports no third-party package that only
  an extra installs (prometheus-client, OpenTelemetry, Starlette, Django, ...);
- the **plug-ins** (``prometheus.py``, ``otel.py``, ``dashboard/``, ``contrib/``) reach the
  worker through ``_observe/`` and public names, never ``skiplock._worker.*``; the Django
  integration hosts workers (``concurrent_worker`` runs the supervisor and the job runner's
  classification for django-tasks-db rows), so its few such imports are listed, one by one,
  with the reason: a new one fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import skiplock

ROOT = Path(skiplock.__file__).parent

EXTRAS = frozenset(
    {
        "prometheus_client",
        "opentelemetry",
        "starlette",
        "fastapi",
        "jinja2",
        "uvicorn",
        "h11",
        "multipart",
        "python_multipart",
        "django",
        "django_tasks",
        "django_tasks_db",
        "pydantic",
    }
)
"""Top-level packages that only an optional extra installs (pyproject's optional-dependencies)."""

PLUGINS = (
    "prometheus.py",
    "otel.py",
    "dashboard/",
    "contrib/",
    "_cli/dashboard.py",
    "_typed.py",
)
"""Paths (under src/skiplock) of the modules that may import an extra (``_cli/dashboard.py``
is the dashboard's own verb: it serves ``dashboard/`` with uvicorn, imported only when run;
``_typed.py`` imports pydantic only for a task whose annotations name a model)."""

HOSTS_A_WORKER = frozenset(
    {
        ("skiplock.contrib.django.worker", "skiplock._worker.supervisor"),  # report_ready
        ("skiplock.contrib.django.worker", "skiplock._worker.worker"),  # runs core Workers
        ("skiplock.contrib.django.processes", "skiplock._worker.supervisor"),  # --processes
        (  # concurrent_worker --processes N: the supervisor's child/parent protocol
            "skiplock.contrib.django.management.commands.concurrent_worker",
            "skiplock._worker.supervisor",
        ),
        ("skiplock.contrib.django._runner", "skiplock._worker.classify"),  # tasks-db outcomes
    }
)
"""The plug-ins' imports of worker internals that are allowed: Django's worker command is a
runtime host, not an exporter."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports (relative imports resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def is_plugin(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return any(relative == p or relative.startswith(p) for p in PLUGINS)


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        name = module_name(path)
        names = imported(path)
        if not is_plugin(path):
            for extra in sorted({n.split(".")[0] for n in names} & EXTRAS):
                found.append(f"core {name} imports the extra {extra}")
        else:
            internal = {
                ".".join(n.split(".")[:3]) for n in names if n.startswith("skiplock._worker.")
            }
            for target in sorted(internal):
                if (name, target) not in HOSTS_A_WORKER:
                    found.append(f"plug-in {name} imports worker internals {target}")
    return found


def test_the_core_imports_no_extra_and_no_plugin_imports_worker_internals() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("_app_x.py", "import prometheus_client\n", "core skiplock._app_x imports the extra"),
        (
            "_worker/x.py",
            "def f():\n    from opentelemetry import trace\n",
            "core skiplock._worker.x imports the extra opentelemetry",
        ),
        (
            "_observe/x.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from starlette import A\n",
            "core skiplock._observe.x imports the extra starlette",
        ),
        (
            "otel.py",
            "from ._worker.classify import Decision\n",
            "plug-in skiplock.otel imports worker internals skiplock._worker.classify",
        ),
        (
            "dashboard/x.py",
            "from .._worker import runner\n",
            "plug-in skiplock.dashboard.x imports worker internals skiplock._worker.runner",
        ),
    ],
)
def test_the_walk_catches_each_kind_of_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, source: str, expected: str
) -> None:
    """The rule can fail: a copy of the tree with one bad import added is refused."""
    copy = tmp_path / "skiplock"
    for path in ROOT.rglob("*.py"):
        target = copy / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    bad = copy / where
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text(source)
    monkeypatch.setattr(f"{__name__}.ROOT", copy)
    assert any(v.startswith(expected) for v in violations(copy)), violations(copy)


def test_observe_sits_below_the_worker() -> None:
    """Nothing in ``_observe/`` imports ``skiplock._worker`` (the events and the tracer read
    ``_attempt.Decision``, a record below the worker)."""
    upward = [
        f"{module_name(path)} imports {name}"
        for path in sorted((ROOT / "_observe").rglob("*.py"))
        for name in sorted(imported(path))
        if name == "skiplock._worker" or name.startswith("skiplock._worker.")
    ]
    assert upward == []
