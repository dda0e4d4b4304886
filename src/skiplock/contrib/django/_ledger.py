"""Where a Django backend's ``@periodic`` slots are claimed: skiplock's slot table, on the
Django database the backend writes its tasks to, through Django's own connection.

The claim and the task's enqueue then share one Django transaction whatever the backend: a
``SkiplockBackend``'s enqueue runs on that connection already, and django-tasks-db's
``DatabaseBackend`` writes its row through the ORM on the same alias. The ledger of a
database that also holds a ``SkiplockBackend`` is that backend's (its schema, so the
worker's own scheduler and these sweeps share it); otherwise it is skiplock's default schema
of that database, created by ``manage.py migrate`` (``schema.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._backends import Backend
from ..._backends.registry import open_backend
from ._urls import database_url


class PeriodicUnsupported(Exception):
    """The task's backend is one no skiplock scheduler can enqueue into (a check error)."""


@dataclass(frozen=True)
class Ledger:
    database: str
    """The Django ``DATABASES`` alias of the claim and the enqueue."""
    backend: Backend
    """An unopened skiplock backend: its statements run on Django's connection."""
    url: str
    """Where that backend's schema is (to check it is migrated)."""


_LEDGERS: dict[str, Backend] = {}


def tasks_db_database() -> str:
    from django.db import router
    from django_tasks_db.models import DBTaskResult

    return str(router.db_for_write(DBTaskResult))


def is_tasks_db(backend: object) -> bool:
    try:
        from django_tasks_db import DatabaseBackend
    except ImportError:
        return False
    return isinstance(backend, DatabaseBackend)


def skiplock_backend_on(database: str) -> Any:
    """The first ``SkiplockBackend`` whose jobs live in ``database``, or None."""
    from django.tasks import task_backends

    from .backend import SkiplockBackend

    for backend in task_backends.all():
        if isinstance(backend, SkiplockBackend) and backend.database == database:
            return backend
    return None


def default_ledger_url(database: str) -> str:
    from django.conf import settings

    return database_url(settings.DATABASES[database], None)


def ledger_for(backend: Any) -> Ledger:
    """The ledger of a task backend, or ``PeriodicUnsupported`` saying why there is none."""
    from django.conf import settings

    from .backend import SkiplockBackend
    from .checks import ENGINES

    if isinstance(backend, SkiplockBackend):
        return Ledger(backend.database, _cached(backend.app.url), backend.app.url)
    if not is_tasks_db(backend):
        raise PeriodicUnsupported(
            f"backend {backend.alias!r} is a {type(backend).__name__}: no skiplock worker "
            "serves it, so its @periodic tasks would never be enqueued (use a "
            "SkiplockBackend or django_tasks_db.DatabaseBackend)"
        )
    database = tasks_db_database()
    engine = settings.DATABASES[database].get("ENGINE")
    if engine not in ENGINES:
        raise PeriodicUnsupported(
            f"backend {backend.alias!r} stores its tasks in database {database!r} ({engine}); "
            f"skiplock's slot ledger needs one of {', '.join(ENGINES)}"
        )
    return ledger_on(database)


def ledger_on(database: str) -> Ledger:
    """The slot ledger of a Django database: its SkiplockBackend's schema, else skiplock's
    default schema there (``PeriodicDefer`` reads and claims this one)."""
    owner = skiplock_backend_on(database)
    url = owner.app.url if owner is not None else default_ledger_url(database)
    return Ledger(database, _cached(url), url)


def _cached(url: str) -> Backend:
    backend = _LEDGERS.get(url)
    if backend is None:
        backend = _LEDGERS[url] = open_backend(url)
    return backend


def check_periodic_backends(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """``skiplock.E006``: a ``@periodic`` task on a backend no skiplock scheduler can enqueue
    into (an ImmediateBackend, a backend on another engine...) is an error at startup, not a
    schedule that silently never fires."""
    from django.core import checks

    from .periodic_tasks import registered_periodic_tasks

    errors = []
    for entry in registered_periodic_tasks():
        try:
            ledger_for(entry.bound_task.get_backend())
        except PeriodicUnsupported as exc:
            errors.append(
                checks.Error(
                    f"@periodic {entry.title} cannot be scheduled: {exc}",
                    hint="periodic tasks run in concurrent_worker/task_worker of a "
                    "SkiplockBackend or django_tasks_db.DatabaseBackend",
                    id="skiplock.E006",
                )
            )
    return errors
