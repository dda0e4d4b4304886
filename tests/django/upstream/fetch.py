"""Django's own task-framework tests (``tests/tasks`` of the installed Django's sdist), fetched
from PyPI at test time with pip and cached under ``.cache/django-upstream/<version>/``: no
Django code is committed here (CI reaches PyPI: about 8 s, 11 MB, once per checkout; offline,
the suite is skipped, saying why, after pip's one bounded retry).

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


PIP_TIMEOUT_S = 20
"""pip's own per-connection timeout (the environment may say minutes: offline then cost
``retries`` times that, twice per ``make test``)."""
FETCH_TIMEOUT_S = 120.0


class Unavailable(Exception):
    """Django's sdist could not be fetched (offline, PyPI away): the suite skips, saying so.
    Anything else (a cached module that fails to import) is a failure, not a skip."""


def _cache() -> Path:
    return ROOT / ".cache" / "django-upstream" / django.__version__


def pip_command(dest: Path) -> list[str]:
    """pip downloading the installed Django's sdist into ``dest`` (bounded retries)."""
    return [
        *(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"),
        *("--no-binary", ":all:", "--timeout", str(PIP_TIMEOUT_S), "--retries", "1"),
        *(f"Django=={django.__version__}", "--dest", str(dest)),
    ]


def download(into: Path) -> None:
    """``tests/tasks`` of the sdist into ``into/tasks``, whole or not at all: extracted beside
    it and renamed into place, so an interrupted fetch never leaves a cache that looks done."""
    into.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=into) as scratch:
        try:
            subprocess.run(
                pip_command(Path(scratch)), check=True, capture_output=True, timeout=FETCH_TIMEOUT_S
            )
        except subprocess.CalledProcessError as exc:
            said = exc.stderr.decode(errors="replace").strip().splitlines()
            raise Unavailable(f"could not be fetched: {said[-1] if said else exc}") from exc
        except (subprocess.TimeoutExpired, OSError) as exc:
            raise Unavailable(f"could not be fetched: {exc}") from exc
        sdists = list(Path(scratch).glob("*.tar.gz"))
        if len(sdists) != 1:
            raise Unavailable(f"could not be fetched: pip left {[p.name for p in sdists]}")
        prefix = f"{sdists[0].name.removesuffix('.tar.gz')}/tests/tasks/"
        staged = Path(scratch) / PACKAGE
        staged.mkdir()
        with tarfile.open(sdists[0]) as archive:
            for member in archive.getmembers():
                if member.isfile() and member.name.startswith(prefix):
                    name = member.name.removeprefix(prefix)
                    if "/" not in name and name.endswith(".py"):
                        source = archive.extractfile(member)
                        assert source is not None
                        (staged / name).write_bytes(source.read())
        if not (staged / "tasks.py").exists():
            raise Unavailable(f"could not be fetched: no tests/tasks in {sdists[0].name}")
        try:
            staged.rename(into / PACKAGE)
        except OSError:  # a parallel run (the other database) put it there first
            if not (into / PACKAGE / "tasks.py").exists():
                raise


def upstream(module: str) -> ModuleType:
    """``tasks.<module>`` of Django's tests, fetched first if not cached yet (``Unavailable``
    if it cannot be)."""
    cache = _cache()
    if not (cache / PACKAGE / "tasks.py").exists():
        download(cache)
    if str(cache) not in sys.path:
        sys.path.insert(0, str(cache))
    return importlib.import_module(f"{PACKAGE}.{module}")
