"""``SkiplockBackend.task_class``: Django's ``Task`` with ``max_attempts`` and ``backoff``.

Django 6.1's ``@task`` forwards extra keyword arguments to the backend's ``task_class``;
django/new-features#142 proposes ``@task(max_attempts=10, backoff=fn)`` where
``fn(exception, task_result)`` returns the seconds before the next attempt, or None to stop
retrying. Accepting them now means a project keeps working unchanged when Django adopts them.
``.using()`` does not change them (as proposed).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.tasks import Task


@dataclass(frozen=True, slots=True, kw_only=True)
class SkiplockDjangoTask(Task):  # type: ignore[misc]
    max_attempts: int | None = None
    """Attempts the task's own failures may spend (None: 1, or ``@skiplock_options``')."""
    backoff: Callable[[BaseException, Any], float | int | None] | None = None
    """Seconds before the next attempt after a failure, or None: not retried."""

    def enqueue_on_commit(self, *args: Any, **kwargs: Any) -> None:
        """Enqueue once every transaction open on this thread has committed (none open:
        now), as django/new-features#161 proposes; a rollback of any of them enqueues nothing.

        Aware of several databases: the transactions waited for are those open on any
        ``DATABASES`` alias, not only the default one or the jobs' own, because the rows a
        task reads may live in another database than its job. ``enqueue()`` inside a
        transaction on the jobs' database stays the default: the job then commits or rolls
        back with the rows it depends on, with no window between the commit and the enqueue
        in which a crash loses it.
        """
        from django.db import connections, transaction

        waiting = {c.alias for c in connections.all(initialized_only=True) if c.in_atomic_block}
        if not waiting:
            self.enqueue(*args, **kwargs)
            return

        def committed(alias: str) -> None:
            waiting.discard(alias)
            if not waiting:
                self.enqueue(*args, **kwargs)

        for alias in sorted(waiting):
            transaction.on_commit(functools.partial(committed, alias), using=alias)
