"""``concurrent_worker`` on django-tasks-db's ``DatabaseBackend``: the seed's worker, fixed.

A project on the seed's stack (django-tasks-db's table, ``DatabaseBackend``) switches worker
without migrating a row: this worker reads and writes that table exactly as django-tasks-db's
own ``db_worker`` does (statuses, ``started_at``, ``worker_ids``, ``return_value``,
``exception_class_path``, ``traceback``), so either worker can take over from the other.

What it does differently from django-tasks-concurrent 0.7.3 (see docs/django.md):

- one claimer, not N pollers: it claims as many ready rows as it has free slots in one
  transaction (``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite: an EXCLUSIVE
  transaction, django-tasks-db's own safe claim) and marks them RUNNING;
- one writer: outcomes that finish together are written in one transaction (one commit, one
  UPDATE per distinct outcome), not one commit per task;
- its own database work (claims, result writes) runs on one thread of its own with one
  persistent connection, never on a thread that runs task code;
- async tasks run on the event loop; sync tasks on a real pool of ``concurrency`` threads,
  each closing its database connections after every task;
- nothing is stranded in RUNNING by a task: an import failure, a ``task_started`` receiver that
  raises, ``CancelledError`` or ``SystemExit`` raised by the task all record FAILED, like any
  exception; a result write that fails on a dropped connection reconnects and is retried;
- database errors while claiming back off (1 s doubling to 30 s, reset by a success) on a
  fresh connection instead of flooding the log or exiting: claims and result writes report to
  one ``Outage`` (the core worker's), which logs one line when the database goes away and one,
  with its length, when it is back;
- shutdown stops claiming at once, lets running tasks finish for ``shutdown_timeout``
  seconds, then gives unfinished rows back (READY) for the next worker; a second signal skips
  the wait.

It runs on the core worker's runtime primitives: the result writer is a ``Service`` in the
worker's TaskGroup (a writer that dies ends the worker loudly instead of leaving every task
waiting on a write that never comes), and the database's health is one ``Outage``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from inspect import iscoroutinefunction
from traceback import format_exception
from typing import Any

from django.db import DatabaseError, connections, router
from django.tasks import TaskContext
from django.tasks.signals import task_finished, task_started
from django.utils import timezone

from ..._outage import Outage
from ..._service import Service
from ...errors import SchemaError
from ._signals import off_loop, send_robust
from .resilience import ReconnectBackoff

log = logging.getLogger("skiplock.contrib.django")

WRITE_RETRY_CAP_S = 5.0
CLAIM_GATHER_S = 0.005
"""While some tasks run, how long a claim waits for more slots to free (one claim, more rows)."""


def _close_thread_connections() -> None:
    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except Exception:
            log.debug("closing a connection failed", exc_info=True)


def _call_sync(
    started: Callable[[], Any],
    func: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
) -> Any:
    """A sync task on a pool thread, ``task_started`` sent first on the same thread (as
    ``db_worker`` does); its connections are closed after it, whatever happens."""
    try:
        started()
        return func(*args, **kwargs)
    finally:
        _close_thread_connections()


def _send_started(sender: type[Any], result: Any) -> None:
    """``task_started``, not robustly: a receiver that raises fails the task, as under
    django-tasks-db's ``db_worker``."""
    task_started.send(sender=sender, task_result=result)


class _Writer(Service):
    """The one writer of a ``TasksDbWorker``: ready at once, cancelled when the worker ends."""

    name = "tasksdb writer"

    def __init__(self, worker: TasksDbWorker) -> None:
        super().__init__()
        self._worker = worker

    async def serve(self) -> None:
        self.mark_ready()
        await self._worker._writer()


class _Released(Exception):
    """The worker gave a running row back (shutdown grace period over)."""


class TasksDbWorker:
    """Serve one django-tasks-db ``DatabaseBackend`` alias (see the module docstring)."""

    def __init__(
        self,
        backend: Any,
        *,
        concurrency: int,
        interval: float,
        queue_names: Sequence[str] | None,
        shutdown_timeout: float,
        worker_id: str | None = None,
    ) -> None:
        from django_tasks_db.models import DBTaskResult

        self.model = DBTaskResult
        self.backend = backend
        self.alias: str = backend.alias
        self.concurrency = concurrency
        self.interval = interval
        self.queue_names = tuple(queue_names) if queue_names else None
        self.shutdown_timeout = shutdown_timeout
        self.worker_id = worker_id or f"skiplock-{socket.gethostname()}-{os.getpid()}"[:64]
        self.db_alias = router.db_for_write(DBTaskResult)
        self.processed = 0
        self.abandoned_threads = 0
        self.ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._forced = asyncio.Event()
        self._wake = asyncio.Event()
        self._running: dict[asyncio.Task[None], Any] = {}
        self._db = ThreadPoolExecutor(1, thread_name_prefix="skiplock-tasksdb-db")
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="skiplock-tasksdb-task")
        self._backoff = ReconnectBackoff()
        self.outage = Outage(self._wake.set, logger=log)  # back: claim at once
        self._claim_min = max(1, concurrency // 2)
        self._outcomes: list[tuple[Any, dict[str, Any], asyncio.Future[None]]] = []
        self._outcome_ready = asyncio.Event()

    # -- control ------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """First call: stop claiming and drain. Second call: skip the drain wait."""
        if self._stopping.is_set():
            self._forced.set()
        self._stopping.set()
        self._wake.set()

    async def _on_db(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._db, fn, *args)

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, *, burst: bool = False) -> None:
        """Claim and run tasks until stopped (or, with ``burst``, until nothing is ready)."""
        log.info(
            "tasks-db worker %s: backend %r, concurrency %d, queues %s",
            self.worker_id,
            self.alias,
            self.concurrency,
            ",".join(self.queue_names) if self.queue_names else "*",
        )
        await self._on_db(self._require_table)
        writer = _Writer(self)
        try:
            async with asyncio.TaskGroup() as tg:
                await writer.start(tg)
                try:
                    await self._claim_loop(burst)
                    await self._drain()
                finally:
                    writer.stop()
        except BaseExceptionGroup as group:  # what the loop raised, unwrapped as before
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            left = list(self._running)  # none after a drain; a dead writer's waiting tasks
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)
            await self._on_db(_close_thread_connections)
            self._db.shutdown(wait=True)
            self._pool.shutdown(wait=False, cancel_futures=True)
        log.info("tasks-db worker %s stopped after %d tasks", self.worker_id, self.processed)

    async def _claim_loop(self, burst: bool) -> None:
        while not self._stopping.is_set():
            free = self.concurrency - len(self._running)
            if free <= 0:
                await self._wait(None)
                continue
            if self._running and free < self._claim_min:
                # busy: let a few more slots free so one claim takes several rows
                await asyncio.sleep(CLAIM_GATHER_S)
                free = self.concurrency - len(self._running)
            try:
                rows = await self._on_db(self._claim, free)
            except Exception as exc:
                if self._stopping.is_set():
                    return  # a shutdown raced the error: nothing to retry
                await self._on_db(self._require_table)  # dropped since: no retry cures that
                delay = self._backoff.next_delay()
                self.outage.failed(f"claim (retrying in {delay:.0f}s)", exc)
                await self._on_db(_close_thread_connections)
                await self._wait(delay)
                continue
            self._backoff.succeeded()
            self.outage.answered()
            self.ready.set()
            for row in rows:
                task = asyncio.create_task(self._run_one(row))
                self._running[task] = row
                task.add_done_callback(self._finished)
            if not rows:
                if burst and not self._running:
                    return
                await self._wait(self.interval)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)
        self.processed += 1
        self._wake.set()

    async def _wait(self, timeout: float | None) -> None:
        """Until a slot frees, a stop is asked for, or ``timeout`` passes."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _drain(self) -> None:
        if not self._running:
            return
        log.info(
            "draining %d running tasks (up to %.0fs)", len(self._running), self.shutdown_timeout
        )
        drained: asyncio.Future[Any] = asyncio.gather(*self._running, return_exceptions=True)
        forced: asyncio.Future[Any] = asyncio.ensure_future(self._forced.wait())
        await asyncio.wait(
            [drained, forced], timeout=self.shutdown_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        forced.cancel()
        left = dict(self._running)
        if not left:
            return
        log.warning("shutdown: giving %d unfinished tasks back (READY)", len(left))
        for task in left:
            task.cancel()
        self.abandoned_threads = sum(1 for row in left.values() if not row._skiplock_async)
        await self._on_db(self._release, [row.pk for row in left.values()])
        await asyncio.gather(*left, return_exceptions=True)

    # -- database work (on the worker's own thread) ------------------------------------------

    def _require_table(self) -> None:
        """SchemaError, in one line saying to migrate, if django-tasks-db's table is missing
        (a project that never ran ``migrate`` for it): no claim can succeed, so the worker
        stops instead of retrying for ever. A database that does not answer is not this:
        the claim loop's backoff handles it."""
        table = self.model._meta.db_table
        try:
            with connections[self.db_alias].cursor() as cursor:
                tables = connections[self.db_alias].introspection.table_names(cursor)
        except DatabaseError:
            _close_thread_connections()
            return  # unreachable, not missing: the claim's backoff and outage log handle it
        if table not in tables:
            database = "" if self.db_alias == "default" else f" --database={self.db_alias}"
            raise SchemaError(
                f"task backend {self.alias!r}: django-tasks-db's table {table!r} is missing "
                f"from database {self.db_alias!r}: run `manage.py migrate{database}`"
            )

    def _claim(self, limit: int) -> list[Any]:
        from django.tasks import TaskResultStatus
        from django_tasks_db.utils import exclusive_transaction

        ready = self.model.objects.using(self.db_alias).ready().filter(backend_name=self.alias)
        if self.queue_names:
            ready = ready.filter(queue_name__in=self.queue_names)
        with exclusive_transaction(self.db_alias):
            rows = list(ready.select_for_update(skip_locked=True)[:limit])
            if not rows:
                return rows
            now = timezone.now()
            first = [r.pk for r in rows if not r.worker_ids]
            if first:
                self.model.objects.using(self.db_alias).filter(pk__in=first).update(
                    status=TaskResultStatus.RUNNING, started_at=now, worker_ids=[self.worker_id]
                )
            for row in rows:
                if row.worker_ids:  # run before (requeued): keep its history of claimers
                    row.claim(self.worker_id)
                else:
                    row.status = TaskResultStatus.RUNNING
                    row.started_at = now
                    row.worker_ids = [self.worker_id]
        return rows

    def _write_batch(self, batch: list[tuple[Any, dict[str, Any]]]) -> None:
        """Outcomes in one transaction (one commit for many tasks), one UPDATE per distinct
        outcome (a drain of tasks returning the same value writes one statement), each only
        over rows still RUNNING (a row given back at shutdown is left READY)."""
        from django.db import transaction
        from django.tasks import TaskResultStatus

        groups: dict[str, tuple[dict[str, Any], list[Any]]] = {}
        for pk, fields in batch:
            key = json.dumps(fields, sort_keys=True, default=str)
            groups.setdefault(key, (fields, []))[1].append(pk)
        now = timezone.now()
        objects = self.model.objects.using(self.db_alias)
        with transaction.atomic(using=self.db_alias):
            for fields, pks in groups.values():
                objects.filter(pk__in=pks, status=TaskResultStatus.RUNNING).update(
                    finished_at=now, **fields
                )

    def _release(self, pks: list[Any]) -> None:
        from django.tasks import TaskResultStatus

        self.model.objects.using(self.db_alias).filter(
            pk__in=pks, status=TaskResultStatus.RUNNING
        ).update(status=TaskResultStatus.READY)

    async def _record(self, row: Any, fields: dict[str, Any]) -> None:
        """Hand an outcome to the writer and wait until it is written (or given up)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._outcomes.append((row.pk, fields, done))
        self._outcome_ready.set()
        await done

    async def _writer(self) -> None:
        """Write the outcomes gathered since the last write, all at once; a dropped
        connection is reopened and the batch retried with backoff (until a forced stop)."""
        backoff = ReconnectBackoff(first_s=0.1, cap_s=WRITE_RETRY_CAP_S)
        while True:
            await self._outcome_ready.wait()
            self._outcome_ready.clear()
            batch, self._outcomes = self._outcomes, []
            while batch:
                try:
                    await self._on_db(self._write_batch, [(pk, f) for pk, f, _ in batch])
                    backoff.succeeded()
                    self.outage.answered()
                    break
                except DatabaseError as exc:
                    if self._forced.is_set():
                        log.error("%d outcomes not written (%s): left RUNNING", len(batch), exc)
                        break
                    delay = backoff.next_delay()
                    self.outage.failed(f"writing {len(batch)} outcomes", exc)
                    await self._on_db(_close_thread_connections)
                    await asyncio.sleep(delay)
            for _, _, done in batch:
                if not done.done():
                    done.set_result(None)

    # -- one task -----------------------------------------------------------------------------

    async def _run_one(self, row: Any) -> None:
        from django.tasks import TaskResultStatus

        row._skiplock_async = False
        try:
            task = row.task  # imports task_path: a failure is this task's failure
            row._skiplock_async = iscoroutinefunction(task.func)
            result = row.task_result
            sender = type(task.get_backend())
            started = functools.partial(_send_started, sender, result)
            args = list(result.args)
            if task.takes_context:
                args.insert(0, TaskContext(task_result=result))
            if row._skiplock_async:
                await off_loop(task_started, sender, started, executor=self._pool)
                value = await task.func(*args, **result.kwargs)
            else:
                loop = asyncio.get_running_loop()
                value = await loop.run_in_executor(
                    self._pool, _call_sync, started, task.func, args, result.kwargs
                )
            json.dumps(value)  # what the JSON column will need: a TypeError fails the task
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the worker's own cancellation (shutdown): the row was given back
            await self._failed(row, exc)  # raised by the task itself
            return
        except BaseException as exc:  # SystemExit from a task too: record it, keep working
            await self._failed(row, exc)
            return
        row.status = TaskResultStatus.SUCCESSFUL
        row.return_value = value
        row.exception_class_path = row.traceback = ""
        await self._record(
            row,
            {
                "status": TaskResultStatus.SUCCESSFUL,
                "return_value": value,
                "exception_class_path": "",
                "traceback": "",
            },
        )
        await self._send_finished(row)

    async def _failed(self, row: Any, exc: BaseException) -> None:
        from django.tasks import TaskResultStatus

        log.error("task %s (%s) failed", row.pk, row.task_path, exc_info=exc)
        fields = {
            "status": TaskResultStatus.FAILED,
            "return_value": None,
            "exception_class_path": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "traceback": "".join(format_exception(exc)),
        }
        for name, value in fields.items():
            setattr(row, name, value)
        await self._record(row, fields)
        await self._send_finished(row)

    async def _send_finished(self, row: Any) -> None:
        """``task_finished`` once the outcome is written (as ``db_worker``), on a task
        thread where its receivers may use the ORM (``_signals.off_loop``)."""
        row.finished_at = timezone.now()
        try:
            result = row.task_result
            sender = type(result.task.get_backend())
        except Exception:
            log.exception("task %s: no task_finished (its task cannot be rebuilt)", row.pk)
            return
        await off_loop(
            task_finished, sender, send_robust, task_finished, sender, result, executor=self._pool
        )
