"""Django's task signals, sent where an ordinary receiver may use the ORM.

Django's own workers (django-tasks-db's ``db_worker``) are synchronous: they send
``task_started``/``task_finished`` on a plain thread, so a receiver that reads or writes a model
just works. skiplock's workers run on an event loop, and Django refuses the ORM on a thread
running one (``SynchronousOnlyOperation``): sent from the loop, such a receiver raised, which on
django-tasks-db's table failed every task and on skiplock's backend was logged and lost.

So a signal sent from the loop goes to a thread (the pool the caller names, or the loop's
default executor), and that thread's stale Django connections are closed after it, as after a
sync task. When the only receivers are Django's own log lines (``django.tasks.signals``), which
touch no database, it is sent on the loop at once: a worker of async tasks pays no thread hop
for signals nobody listens to.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from django.db import close_old_connections
from django.tasks import signals as task_signals

log = logging.getLogger("skiplock.contrib.django")

T = TypeVar("T")

DJANGO_OWN = frozenset(
    {
        task_signals.log_task_enqueued,
        task_signals.log_task_started,
        task_signals.log_task_finished,
    }
)
"""Django's own receivers of the task signals: a log line each, no database."""


def only_django_own(signal: Any, sender: Any) -> bool:
    """Whether ``signal``'s live receivers for ``sender`` are Django's own log lines alone
    (False when it cannot tell: then it goes to a thread, which is always safe)."""
    try:
        sync_receivers, async_receivers = signal._live_receivers(sender)
    except Exception:  # a Django whose dispatcher changed shape: the safe way
        return False
    return not async_receivers and all(r in DJANGO_OWN for r in sync_receivers)


TASKS_LOG: logging.Logger = getattr(task_signals, "logger", None) or logging.getLogger(
    "django.tasks"
)
"""Where Django's own receivers of the task signals write their lines."""


class Audience:
    """Whether one signal's live receivers for one sender are Django's own log lines alone
    (``only_django_own``), read again only when the signal's receivers change: a sync task's
    wrapper asks at every run, and reading them is ~1.2 us each time (measured)."""

    __slots__ = ("_known", "sender", "signal")

    def __init__(self, signal: Any, sender: Any) -> None:
        self.signal = signal
        self.sender = sender
        self._known: tuple[tuple[Any, ...] | None, bool] = (None, False)
        """(the receivers as last read, the answer for them), replaced whole: the threads of
        several jobs ask at once, and each pair they read must be one that was true."""

    def only_django_own(self) -> bool:
        seen, own = self._known
        receivers = getattr(self.signal, "receivers", None)
        if seen is None or receivers is None or tuple(receivers) != seen:
            own = only_django_own(self.signal, self.sender)
            # read after: a look may clear dead receivers, which changes the list
            after = getattr(self.signal, "receivers", None)
            self._known = (None if after is None else tuple(after), own)
        return own

    def unheard(self, level: int) -> bool:
        """Whether sending the signal would reach nobody: its only receivers are Django's own
        log lines and ``django.tasks`` drops a record at ``level`` (a project that quiets the
        per-task logs). False when it cannot tell."""
        return not TASKS_LOG.isEnabledFor(level) and self.only_django_own()


def send_robust(signal: Any, sender: Any, result: Any) -> None:
    """Send with the backend's class as sender, as Django's own workers do; a receiver that
    raises is logged and the others still run."""
    for receiver, outcome in signal.send_robust(sender, task_result=result):
        if isinstance(outcome, Exception):
            log.error("%s receiver %r raised", signal, receiver, exc_info=outcome)


def on_sync_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a thread of its own doing: this thread's stale connections are closed
    after it (a receiver's ORM query opened one), as after a sync task."""
    try:
        return fn(*args)
    finally:
        close_old_connections()


async def off_loop(
    signal: Any,
    sender: Any,
    fn: Callable[..., T],
    *args: Any,
    executor: Executor | None = None,
) -> T:
    """Run ``fn(*args)``, which sends ``signal`` (and may do what goes with it), where its
    receivers may use the ORM: on ``executor`` (None: the loop's default one) in a copy of
    this context (``current_job()`` is the same there), or on the loop at once when only
    Django's own receivers listen."""
    if only_django_own(signal, sender):
        return fn(*args)
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    call = functools.partial(context.run, on_sync_thread, fn, *args)
    return await loop.run_in_executor(executor, call)


_SENDING: set[asyncio.Future[Any]] = set()
"""Signals ``send_soon`` handed to a thread and not yet sent (kept from the collector)."""


def send_soon(signal: Any, sender: Any, result: Any) -> None:
    """From code on the loop that must not wait (the scheduler): send ``signal`` robustly, on
    the loop's default executor where receivers may use the ORM (at once when only Django's
    own listen). A receiver that raises is logged."""
    if only_django_own(signal, sender):
        send_robust(signal, sender, result)
        return
    loop = asyncio.get_running_loop()
    sending = loop.run_in_executor(None, on_sync_thread, send_robust, signal, sender, result)
    _SENDING.add(sending)
    sending.add_done_callback(_SENDING.discard)
