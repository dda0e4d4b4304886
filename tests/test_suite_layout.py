"""No test module imports another: what modules share lives in ``tests/helpers.py`` (or
``tests/backends/helpers.py``) and the conftest files. A test module that imports another runs
that module's import-time code and re-exports its fixtures into the importer, so deleting or
marking one test file silently changes another's."""

from __future__ import annotations

import ast
from pathlib import Path

from . import tiers

TESTS = Path(__file__).resolve().parent


def module_name(path: Path, root: Path) -> str:
    """``tests.backends.test_rate`` for ``root/tests/backends/test_rate.py``."""
    return ".".join(path.relative_to(root).with_suffix("").parts)


def imported_modules(path: Path, root: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (function-local imports too), absolute:
    ``from . import x`` counts as ``package.x``, since ``x`` may be a module."""
    package = module_name(path, root).rsplit(".", 1)[0].split(".")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            stem = ".".join([*base, *([node.module] if node.module else [])])
            found.add(stem)
            found |= {f"{stem}.{alias.name}" for alias in node.names}
    return found


def cross_imports(root: Path) -> dict[str, set[str]]:
    """For each test module under ``root``'s ``tests`` package, the test modules it imports."""
    modules = {module_name(p, root): p for p in (root / "tests").rglob("test_*.py")}
    found: dict[str, set[str]] = {}
    for name, path in sorted(modules.items()):
        wrong = {m for m in imported_modules(path, root) if m in modules and m != name}
        if wrong:
            found[name] = wrong
    return found


def test_no_test_module_imports_another() -> None:
    assert cross_imports(TESTS.parent) == {}, "move what they share to tests/helpers.py"


def test_the_check_sees_every_spelling_of_such_an_import(tmp_path: Path) -> None:
    """Relative, absolute, ``from . import``, across packages and inside a function: each is
    found; helpers, conftest and the apps are not test modules."""
    tests = tmp_path / "tests"
    (tests / "sub").mkdir(parents=True)
    for name in ("__init__", "helpers", "conftest", "test_a", "sub/__init__", "sub/test_b"):
        (tests / f"{name}.py").write_text("")
    spellings = {
        "test_rel.py": "from .test_a import x\n",
        "test_abs.py": "import tests.test_a\n",
        "test_from_pkg.py": "from . import test_a\n",
        "test_down.py": "from .sub.test_b import y\n",
        "test_pkg_down.py": "from .sub import test_b\n",
        "test_local.py": "def f():\n    from tests.sub.test_b import y\n",
        "sub/test_up.py": "from ..test_a import x\n",
        "test_clean.py": "from .helpers import x\nfrom .conftest import PG\nfrom . import sub\n",
    }
    for name, text in spellings.items():
        (tests / name).write_text(text)
    found = cross_imports(tmp_path)
    assert found == {
        "tests.test_rel": {"tests.test_a"},
        "tests.test_abs": {"tests.test_a"},
        "tests.test_from_pkg": {"tests.test_a"},
        "tests.test_down": {"tests.sub.test_b"},
        "tests.test_pkg_down": {"tests.sub.test_b"},
        "tests.test_local": {"tests.sub.test_b"},
        "tests.sub.test_up": {"tests.test_a"},
    }


def test_every_test_tiers_names_exists() -> None:
    """A renamed or deleted test must leave tests/tiers.py too, or the fast tier would quietly
    take back a test the list meant to leave out (and the list would rot)."""
    defined: dict[str, set[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        tree = ast.parse(path.read_text(), str(path))
        defined[path.relative_to(TESTS.parent).as_posix()] = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
    missing = [path for path in tiers.SLOW_MODULES if path not in defined]
    missing += [
        f"{path}::{name}"
        for path, names in tiers.SLOW_TESTS.items()
        for name in names
        if name not in defined.get(path, set())
    ]
    assert missing == []
