"""Django's own task-framework tests (``tests/tasks`` of the installed Django's sdist), fetched
from PyPI at test time with pip and cached under ``.cache/django-upstream/<version>/``: no
Django code is committed here (CI reaches PyPI; offline, the suite is skipped, saying why).

The sdist's ``tests/tasks`` package is extracted as it is named there, ``tasks`` (its modules
import each other relatively), and the directory holding it is put on ``sys.path``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

import django

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = "tasks"
"""As in Django's own test run (``tests/`` on the path): ``Task.module_path`` is asserted."""


def _cache() -> Path:
    return ROOT / ".cache" / "django-upstream" / django.__version__


def _download(into: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"Django=={django.__version__}",
                "--dest",
                scratch,
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        (sdist,) = Path(scratch).glob("*.tar.gz")
        prefix = f"{sdist.name.removesuffix('.tar.gz')}/tests/tasks/"
        target = into / PACKAGE
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.startswith(prefix):
                    name = member.name.removeprefix(prefix)
                    if "/" not in name and name.endswith(".py"):
                        source = archive.extractfile(member)
                        assert source is not None
                        (target / name).write_bytes(source.read())


def upstream(module: str) -> ModuleType:
    """``tasks.<module>`` of Django's tests, fetched first if not cached yet."""
    cache = _cache()
    if not (cache / PACKAGE / "tasks.py").exists():
        _download(cache)
    if str(cache) not in sys.path:
        sys.path.insert(0, str(cache))
    return importlib.import_module(f"{PACKAGE}.{module}")
