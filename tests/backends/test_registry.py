"""Backends register by URL scheme; the protocol module imports no implementation."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import skiplock
from skiplock._backends import open_backend
from skiplock._backends import protocol as base
from skiplock._backends.registry import BACKENDS


def modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_protocol_imports_no_backend() -> None:
    """Not even inside a function: every backend imports base, so that would be a circle."""
    tree = ast.parse(Path(base.__file__).read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m.lstrip(".").split(".")[0] in ("sqlite", "postgres")}


def test_an_sqlite_app_never_imports_the_postgres_driver(tmp_path: object) -> None:
    loaded = modules_after(
        f"import skiplock; skiplock.App('sqlite:///{tmp_path}/x.db').new_backend()"
    )
    assert "skiplock._backends.sqlite" in loaded
    assert "asyncpg" not in loaded and "skiplock._backends.postgres" not in loaded


@pytest.mark.parametrize("scheme", sorted(BACKENDS))
def test_every_registered_scheme_builds_its_backend(scheme: str, tmp_path: object) -> None:
    url = f"{scheme}:///{tmp_path}/x.db" if scheme == "sqlite" else f"{scheme}://h/db"
    backend = open_backend(url)
    assert type(backend).__module__ == BACKENDS[scheme].split(":")[0]


def test_an_unknown_scheme_names_the_url() -> None:
    with pytest.raises(skiplock.ConfigurationError, match="mysql"):
        open_backend("mysql://h/db")
