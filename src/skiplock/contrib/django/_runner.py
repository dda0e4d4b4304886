"""Run a Django task inside skiplock's worker: signals, TaskContext, stale connections.

The skiplock task registered for a Django task is a thin wrapper: it rebuilds the Django
``TaskResult`` from the running job, sends Django's own ``task_started``/``task_finished``
(sent robustly: a receiver that raises is logged, never strands the job; always on a thread,
where a receiver may use the ORM: a sync task's own, an async task's through
``_signals.off_loop``), and returns the function's value as JSON for the job row.

A run nobody watches (``_Run.watched``: no receiver but Django's own log lines, which the
``django.tasks`` logger would drop, and a task that takes no context) builds its ``TaskResult``
and sends ``task_finished`` only if it fails; a success sends nothing.

``task_finished`` carries the outcome the row gets, decided here by the same rules the worker
applies (``classify``) before the signal is sent: a value JSON cannot hold is FAILED (the row
is dead with that TypeError), a sync task that ran past its timeout is FAILED (its thread
raises ``JobTimeout`` on return, so the worker records the same whichever sees it first), a
failure that will be retried is READY. An attempt the worker itself cuts short (shutdown, a
lost lease) has not finished: it sends no ``task_finished`` and runs again.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from django.db import close_old_connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from ..._config import RetryPolicy
from ..._job import Disposition, current_attempt_and_deadline, current_job
from ..._payload import encode_result
from ..._task import Task as SkiplockTask
from ..._worker.classify import JobTimeout, classify, error_record
from ...errors import PayloadError
from . import _signals, retries
from ._result_ids import result_id
from ._results import django_time, worker_ids
from .options import django_attempts

log = logging.getLogger("skiplock.contrib.django")

FINAL = (Disposition.DEAD, Disposition.CANCEL)
_ANY_POLICY = RetryPolicy()


@functools.cache
def _host() -> str:
    return socket.gethostname()


def worker_name() -> str:
    """How this process's worker signs its claims by default (``Worker.name``); the host
    is read once (a system call per task otherwise), the pid each time (a fork changes it)."""
    return f"{_host()}:{os.getpid()}"


class _Run:
    """What each call of one Django task's wrapper needs: the task, the sender of the
    signals, and the skiplock task (for its retry rules and the app's result limit)."""

    def __init__(
        self, task: Any, sender: type[Any], skiplock_task: Callable[[], SkiplockTask[Any, Any]]
    ) -> None:
        self.task = task
        self.sender = sender
        self._skiplock_task = skiplock_task
        self.attempts = django_attempts(task)
        """The attempts the task's own failures may spend (``retries.py``)."""
        self._started_audience = _signals.Audience(task_started, sender)
        self._finished_audience = _signals.Audience(task_finished, sender)

    def watched(self) -> bool:
        """Whether anyone sees this run's ``TaskResult`` when it succeeds: the task takes a
        context, or ``task_started``/``task_finished`` reach a receiver (one of the project's,
        or Django's own log lines while ``django.tasks`` logs at INFO). When nobody does (a
        project that quiets the per-task logs), a run that succeeds builds none and sends
        neither signal (they would reach only receivers that drop them): a sync no-op's
        wrapper took ~36 us on one thread, ~7 so (measured; the receivers are read again
        only when they change, ``_signals.Audience``). A failure builds it then
        (``unwatched_*``)."""
        return (
            self.task.takes_context
            or not self._started_audience.unheard(logging.INFO)
            or not self._finished_audience.unheard(logging.INFO)
        )

    def started(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        history: list[str] | None = None,
        now: datetime | None = None,
        *,
        send: bool = True,
    ) -> Any:
        """The RUNNING ``TaskResult`` the task and ``task_started`` see; ``history``: who ran
        the attempts before this one, as ``get_result`` reads them (None: a first attempt);
        ``now``: when it started (None: now); ``send``: send ``task_started`` (not for a run
        nobody watched, whose result is built only once it failed)."""
        job = current_job()
        if now is None:
            now = timezone.now()  # naive local under USE_TZ=False, as Django's own backends
        result = TaskResult(
            task=self.task,
            id=result_id(job.id, self.task.backend),
            status=TaskResultStatus.RUNNING,
            enqueued_at=django_time(job.enqueued_at),
            started_at=now,
            finished_at=None,
            last_attempted_at=now,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.task.backend,
            errors=[],
            worker_ids=[*(history or [])[: job.attempt - 1], worker_name()],
        )
        if send:
            _send(task_started, self.sender, result)
        return result

    def call_args(self, result: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        if self.task.takes_context:
            return (TaskContext(task_result=result), *args)
        return args

    def succeeded(self, result: Any, value: Any) -> Any:
        """The value to store, or (not storable) the failure the row records, raised."""
        try:
            value = self.storable(value)
        except (TypeError, PayloadError) as exc:
            self.failed(result, exc, final=True)  # the row records this very error: a retry
            raise  # would return the same
        _finish(self.sender, result, TaskResultStatus.SUCCESSFUL)
        return value

    def storable(self, value: Any) -> Any:
        """``value`` as the row stores it (Django's JSON rules), or TypeError/PayloadError."""
        value = normalize_json(value)
        limit = self._skiplock_task().app.max_result_bytes  # type: ignore[attr-defined]
        encode_result(self.task.module_path, value, limit)
        return value

    def failed(
        self, result: Any, exc: BaseException, reclaims: int = 0, *, final: bool = False
    ) -> None:
        """Decide this failure (``retries.decide``: the worker then records the same) and
        send ``task_finished`` with the status the row gets for it."""
        from ._results import task_error

        job = current_job()
        error = error_record(job.attempt, exc)
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        object.__setattr__(result, "errors", [task_error(error)])
        retries.decide(
            exc,
            result,
            attempts=1 if final else self.attempts,
            backoff=getattr(self.task, "backoff", None),
            reclaims=0 if final else reclaims,
        )
        sk = self._skiplock_task()
        decision = classify(  # a plain policy: the decided delay is the worker's to read
            exc,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            permanent=sk.permanent,
            retry=_ANY_POLICY,
        )
        status = TaskResultStatus.FAILED if decision.disposition in FINAL else None
        _finish(self.sender, result, status or TaskResultStatus.READY)  # READY: retried

    def history_sync(self) -> list[str] | None:
        """Who ran the earlier attempts (read from the row only for a later attempt; a read
        that fails is logged and the task runs, told only of this attempt's worker)."""
        if current_attempt_and_deadline()[0] == 1:
            return None
        app = self._skiplock_task().app
        try:
            record = app.run_sync(app.get_job(current_job().id))  # type: ignore[attr-defined]
        except Exception:
            log.warning("could not read the attempts of job %d", current_job().id, exc_info=True)
            return None
        return worker_ids(record)

    async def history_async(self) -> list[str] | None:
        if current_attempt_and_deadline()[0] == 1:
            return None
        try:
            record = await self._skiplock_task().app.get_job(current_job().id)
        except Exception:
            log.warning("could not read the attempts of job %d", current_job().id, exc_info=True)
            return None
        return worker_ids(record)

    def reclaims_sync(self) -> int:
        """The running job's reclaims, when deciding its failure needs them (sync side)."""
        if not retries.needs_reclaims(self.attempts):
            return 0
        app = self._skiplock_task().app
        record = app.run_sync(app.get_job(current_job().id))  # type: ignore[attr-defined]
        return retries.reclaims_in(record.errors)

    async def reclaims_async(self) -> int:
        if not retries.needs_reclaims(self.attempts):
            return 0
        record = await self._skiplock_task().app.get_job(current_job().id)
        return retries.reclaims_in(record.errors)


def _finish(sender: type[Any], result: Any, status: str) -> None:
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", timezone.now())
    _send(task_finished, sender, result)


def _send(signal: Any, sender: type[Any], result: Any) -> None:
    """Send with the backend's class as sender, as Django's own workers do (robustly)."""
    _signals.send_robust(signal, sender, result)


def _with_signature(run: Callable[..., Any], task: Any) -> Callable[..., Any]:
    """Give ``run`` the task's call signature (without the context parameter), so skiplock
    checks arity at enqueue and its scheduler passes ``timestamp`` only where it is asked."""
    try:
        signature = inspect.signature(task.func)
    except (TypeError, ValueError):
        return run
    params = list(signature.parameters.values())[1 if task.takes_context else 0 :]
    run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return run


def _past_deadline() -> bool:
    deadline = current_attempt_and_deadline()[1]
    return deadline is not None and datetime.now(UTC) >= deadline


def sync_runner(run_: _Run) -> Callable[..., Any]:
    """The skiplock function of a sync Django task (run on skiplock's thread pool)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            if not run_.watched():
                return unwatched_sync(run_, args, kwargs)
            result = run_.started(args, kwargs, run_.history_sync())
            try:
                value = run_.task.func(*run_.call_args(result, args), **kwargs)
            except BaseException as exc:
                run_.failed(result, exc, run_.reclaims_sync())
                raise
            if _past_deadline():
                # the worker recorded (or will record) a timeout: say so, and end the same way
                timeout = current_job().deadline
                late = JobTimeout(f"timed out (its deadline {timeout} passed before it returned)")
                run_.failed(result, late, run_.reclaims_sync())
                raise late
            return run_.succeeded(result, value)
        finally:
            close_old_connections()

    return _with_signature(run, run_.task)


def unwatched_sync(run_: _Run, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A sync run nobody watches (``_Run.watched``): its ``TaskResult`` is built, and
    ``task_finished`` sent, only if it fails; a success sends nothing."""
    started_at = timezone.now()

    def result() -> Any:
        return run_.started(args, kwargs, run_.history_sync(), started_at, send=False)

    try:
        value = run_.task.func(*args, **kwargs)
    except BaseException as exc:
        run_.failed(result(), exc, run_.reclaims_sync())
        raise
    if _past_deadline():
        timeout = current_job().deadline
        late = JobTimeout(f"timed out (its deadline {timeout} passed before it returned)")
        run_.failed(result(), late, run_.reclaims_sync())
        raise late
    try:
        return run_.storable(value)
    except (TypeError, PayloadError) as exc:
        run_.failed(result(), exc, final=True)
        raise


async def unwatched_async(
    run_: _Run,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    failed: Callable[[Any, BaseException], Awaitable[None]],
) -> Any:
    """An async run nobody watches: as ``unwatched_sync``, on the loop."""
    started_at = timezone.now()

    async def result() -> Any:
        history = await run_.history_async()
        return run_.started(args, kwargs, history, started_at, send=False)

    try:
        value = await run_.task.func(*args, **kwargs)
    except asyncio.CancelledError as exc:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            if _past_deadline():  # the task's timeout: the worker records it as failed
                await failed(await result(), JobTimeout("timed out"))
            raise  # else the worker cut it short (shutdown, lost lease): it runs again
        await failed(await result(), exc)
        raise
    except BaseException as exc:
        await failed(await result(), exc)
        raise
    try:
        return run_.storable(value)
    except (TypeError, PayloadError) as exc:
        final = functools.partial(run_.failed, final=True)
        await _signals.off_loop(task_finished, run_.sender, final, await result(), exc)
        raise


def async_runner(run_: _Run) -> Callable[..., Any]:
    """The skiplock function of an async Django task (run on the worker's loop). Its
    signals are sent on a thread (``_signals.off_loop``), where a receiver may use the ORM as
    it does for a sync task; the task's code runs on the loop."""
    sender = run_.sender

    async def failed(result: Any, exc: BaseException) -> None:
        reclaims = await run_.reclaims_async()
        await _signals.off_loop(task_finished, sender, run_.failed, result, exc, reclaims)

    async def run(*args: Any, **kwargs: Any) -> Any:
        if not run_.watched():
            return await unwatched_async(run_, args, kwargs, failed)
        history = await run_.history_async()
        result = await _signals.off_loop(task_started, sender, run_.started, args, kwargs, history)
        try:
            value = await run_.task.func(*run_.call_args(result, args), **kwargs)
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                if _past_deadline():  # the task's timeout: the worker records it as failed
                    await failed(result, JobTimeout("timed out"))
                raise  # else the worker cut it short (shutdown, lost lease): it runs again
            await failed(result, exc)
            raise
        except BaseException as exc:
            await failed(result, exc)
            raise
        return await _signals.off_loop(task_finished, sender, run_.succeeded, result, value)

    return _with_signature(run, run_.task)


def runner(
    task: Any, sender: type[Any], skiplock_task: Callable[[], SkiplockTask[Any, Any]]
) -> tuple[_Run, Callable[..., Any]]:
    """The run state and the skiplock function of one Django task."""
    run_ = _Run(task, sender, skiplock_task)
    make = async_runner if inspect.iscoroutinefunction(task.func) else sync_runner
    return run_, make(run_)
