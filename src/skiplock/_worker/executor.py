"""The executor: one claimed job through resolve -> decode -> run under timeout -> classify.

It never raises for anything the job did. The only exception that leaves it is the
cancellation the worker itself asked for (shutdown), told apart from a CancelledError the
handler raised by ``current_task().cancelling()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from .._config import RetryPolicy
from .._durable import DurableSource
from .._handback import Handback, handback_for
from .._job import ClaimedJob, StartedJob, current_job, set_current_job
from .._job_log import LogBuffer, capture
from .._payload import decode_args, encode_result
from .._registry import Registry
from .._task import Task, argument_misfit
from ..errors import ArgumentInvalid, PayloadError
from .classify import (
    Decision,
    JobTimeout,
    NewerPayload,
    UnrunnableJob,
    UnstorableResult,
    classify,
)
from .pool import JobPool, SyncPool, Work
from .processes import ChildPool

_NO_TASK_RETRY = RetryPolicy()

NEWER_PAYLOAD_RETRY_S = 60.0
"""How long a job whose payload is newer than this worker knows is put back for (its
attempt given back), for a worker that knows its version to take it."""
NEWER_PAYLOAD_PATIENCE_S = 24 * 3600.0
"""How long after its enqueue such a job keeps being put back; past it, it goes to dead
saying which version it needed (a person can requeue it once such workers run)."""


def resolve(
    registry: Registry, job: ClaimedJob
) -> tuple[Task[Any, Any], list[Any], dict[str, Any]]:
    """The task and decoded arguments, or UnrunnableJob saying why this job cannot run."""
    task = registry.tasks.get(job.task)
    if task is None:
        raise UnrunnableJob(
            f"unknown task {job.task!r}: no task is registered under this name in this worker "
            "(it knows the tasks its app defines when it starts; a name a row holds is never "
            "imported)"
        )
    try:
        args, kwargs = decode_args(job.args_json, job.kwargs_json)
    except Exception as exc:  # any decoding failure dead-letters the row; the worker goes on
        raise UnrunnableJob(str(exc) or type(exc).__name__) from exc
    if job.payload_version != task.version:
        args, kwargs = to_version(registry, task, job, args, kwargs)
    misfit = argument_misfit(task.fn, len(args), tuple(kwargs))
    if misfit is not None:
        raise UnrunnableJob(f"{job.task}: {misfit}")
    if task.typed is not None:  # rebuilt after the upcasts: dead at once if they do not fit
        try:
            args, kwargs = task.typed.load_call(task.name, args, kwargs)
        except ArgumentInvalid as exc:
            raise UnrunnableJob(str(exc)) from exc
    return task, args, kwargs


def to_version(
    registry: Registry,
    task: Task[Any, Any],
    job: ClaimedJob,
    args: list[Any],
    kwargs: dict[str, Any],
) -> tuple[list[Any], dict[str, Any]]:
    """An older payload upcast to the task's version, one step at a time (1 -> 2 -> 3);
    NewerPayload for one newer than the task knows (UnrunnableJob past the patience)."""
    have, want = job.payload_version, task.version
    if have > want:
        raise _newer(registry, task, job)
    for version in range(have, want):
        upcast = task.upcast.get(version)
        if upcast is None:
            raise UnrunnableJob(
                f"{task.name}: payload version {version} has no upcast (version={want}, "
                f"upcast from {sorted(task.upcast) or 'none'})"
            )
        try:
            args, kwargs = upcast(list(args), dict(kwargs))
        except Exception as exc:  # a bug in the upcast: the row stays as written, dead
            why = f"{task.name}: upcast from version {version} failed: {exc!r}"
            raise UnrunnableJob(why) from exc
        if not (isinstance(args, list) and isinstance(kwargs, dict)):
            raise UnrunnableJob(
                f"{task.name}: upcast from version {version} must return (list, dict)"
            )
    return args, kwargs


def _newer(registry: Registry, task: Task[Any, Any], job: ClaimedJob) -> Exception:
    needed = (
        f"{task.name}: payload version {job.payload_version} is newer than this worker's "
        f"(version {task.version})"
    )
    now = registry.clock() if registry.clock is not None else datetime.now(UTC)
    if (now - job.created_at).total_seconds() > NEWER_PAYLOAD_PATIENCE_S:
        hours = NEWER_PAYLOAD_PATIENCE_S / 3600
        return UnrunnableJob(
            f"{needed}: needs a worker that knows version {job.payload_version}, and none "
            f"took it within {hours:g} h of its enqueue"
        )
    return NewerPayload(f"{needed}: left for a worker that knows it", NEWER_PAYLOAD_RETRY_S)


Ended = tuple[BaseException | None, Any]
"""How an attempt ended: what it raised (None on success), and what it returned."""


def _call_catching(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Ended:
    """Run a sync task on its thread and hand back what it raised as a value.

    A GeneratorExit re-raised from a thread's future escapes ``except`` clauses in the
    coroutines above the one that awaits it (a CPython quirk), so it never travels as a raise.
    """
    try:
        return None, fn(*args, **kwargs)
    except BaseException as exc:
        return exc, None


def _on_thread(
    inbox: Handback,
    started: asyncio.Future[None] | None,
    done: asyncio.Future[Ended],
    context: contextvars.Context,
    timeout: float | None,
    call: Callable[[], Ended],
) -> None:
    """On the job's thread: say the code starts now when a timeout counts from here (and
    move ``current_job().deadline`` to match), run it, and hand back how it ended."""
    try:
        if started is not None:
            inbox.post(started, None)
        if timeout is not None:
            context.run(_deadline_from_now, timeout)
        ended: Ended = context.run(call)
    except BaseException as exc:  # _call_catching catches the job's; this is for the rest
        ended = exc, None
    inbox.post(done, ended)


def _deadline_from_now(timeout: float) -> None:
    with contextlib.suppress(LookupError):  # no job context: nothing to move
        deadline = datetime.now(UTC) + timedelta(seconds=timeout)
        set_current_job(dataclasses.replace(current_job(), deadline=deadline))


async def _call_sync(
    fn: Callable[..., Any],
    args: list[Any],
    kwargs: dict[str, Any],
    timeout: float | None,
    pool: SyncPool,
) -> Ended:
    """Run a sync function on the pool, timed from when its thread picks it up.

    A job queued behind threads that timed-out jobs keep is not timed out while it waits
    (issue 9: such jobs were recorded dead without ever running); the pool grows past them.
    An untimed job's thread says nothing when it starts (one loop wake-up less per job):
    nothing here needs to know, as the row's ``started_at`` follows the slot, not the thread.
    """
    loop = asyncio.get_running_loop()
    inbox = handback_for(loop)
    started: asyncio.Future[None] | None = None if timeout is None else loop.create_future()
    done: asyncio.Future[Ended] = loop.create_future()
    context = contextvars.copy_context()
    call = functools.partial(_call_catching, fn, args, kwargs)
    work = pool.submit(_on_thread, inbox, started, done, context, timeout, call)
    try:
        if started is None:
            return await done
        await asyncio.wait((started, done), return_when=asyncio.FIRST_COMPLETED)
        timer = asyncio.timeout(timeout)  # from the start
        try:
            async with timer:
                return await done
        except TimeoutError:
            if not timer.expired():
                raise
            return JobTimeout(f"timed out after {timeout}s (its thread cannot be killed)"), None
    finally:
        if started is not None:
            started.cancel()
        if not done.done() or done.cancelled():  # timed out or cancelled: no outcome came,
            done.cancel()  # so its code may still be running
            work.cancel()  # a queued job never starts; a running one cannot be stopped
            if isinstance(work, Work) and work.running():
                assert isinstance(pool, JobPool)
                pool.note_stuck(work)


async def _invoke(
    task: Task[Any, Any],
    args: list[Any],
    kwargs: dict[str, Any],
    timeout: float | None,
    pool: SyncPool,
) -> Ended:
    """Run the function under its timeout: what it raised (None on success), what it returned.

    Async functions run on the loop, sync ones on the pool (never the loop). Only the
    worker's own cancellation (shutdown) propagates, told apart from a handler's
    CancelledError by ``cancelling()``. No timer is armed when there is no timeout.
    """
    timer = None
    try:
        if not task.is_async:
            return await _call_sync(task.fn, args, kwargs, timeout, pool)
        if timeout is None:  # no timer to arm or leave (the no-op job's path)
            return None, await task.fn(*args, **kwargs)
        timer = asyncio.timeout(timeout)
        async with timer:
            value = await task.fn(*args, **kwargs)
        return None, value
    except TimeoutError as exc:
        if timer is not None and timer.expired():
            return JobTimeout(f"timed out after {timeout}s"), None
        return exc, None
    except asyncio.CancelledError as exc:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # the worker is cancelling this job: shutdown, not a failure
        return exc, None
    except BaseException as exc:  # SystemExit, KeyboardInterrupt... fail the job, not the worker
        return exc, None


def stored_result(registry: Registry, task: Task[Any, Any], value: Any) -> str | None:
    """The JSON a success stores, or UnstorableResult (the job dies, the worker goes on)."""
    if value is None or not task.keep_result:
        return None  # nothing to encode: the hot path of a no-op task
    try:
        if task.typed is not None:
            value = task.typed.dump_result(task.name, value)
        return encode_result(task.name, value, registry.max_result_bytes)
    except (TypeError, PayloadError) as exc:
        raise UnstorableResult(str(exc)) from exc


async def execute(
    registry: Registry,
    job: ClaimedJob,
    pool: SyncPool,
    report: Callable[[int, str], None] | None = None,
    store: DurableSource | None = None,
    children: ChildPool | None = None,
    log: LogBuffer | None = None,
) -> Decision:
    """Run one claimed job and decide its outcome (``report`` takes its progress records;
    ``store`` serves its steps and waits; ``children`` runs the process tasks; ``log`` keeps
    what it logs, from this context: the attempt's own Task). Raises only the worker's own
    cancel."""
    if log is not None:
        capture(log)
    try:
        task, args, kwargs = resolve(registry, job)
    except (UnrunnableJob, NewerPayload) as exc:
        return decide(job, None, exc)
    timeout = job.timeout if job.timeout is not None else task.timeout
    if children is not None and children.takes(task):
        failure, result_json = await _in_child(
            registry, job, task, timeout, children, report, store, log
        )
        return decide(job, task, failure, result_json)  # the result: stored as it came
    set_current_job(StartedJob(job, timeout, report, time.time(), store))
    return ended_as(registry, job, task, await _invoke(task, args, kwargs, timeout, pool))


async def _in_child(
    registry: Registry,
    job: ClaimedJob,
    task: Task[Any, Any],
    timeout: float | None,
    children: ChildPool,
    report: Callable[[int, str], None] | None,
    store: DurableSource | None,
    log: LogBuffer | None = None,
) -> tuple[BaseException | None, str | None]:
    """A process task's attempt in a child (``processes.py``): what it raised, and its
    result as the JSON to store (dumped, bounded and typed there, as on a thread; what it
    logged goes into ``log``). Its arguments cross as the JSON the row holds (upcast here
    first when the row is older: typed ones are rebuilt in the child)."""
    if job.payload_version == task.version:
        args_json, kwargs_json = job.args_json, job.kwargs_json
    else:
        plain = to_version(registry, task, job, *decode_args(job.args_json, job.kwargs_json))
        args_json, kwargs_json = json.dumps(plain[0]), json.dumps(plain[1])
    return await children.run(
        task.fn,
        job,
        args_json,
        kwargs_json,
        timeout,
        report,
        store,
        registry.max_result_bytes,
        task.keep_result,
        log,
    )


def ended_as(registry: Registry, job: ClaimedJob, task: Task[Any, Any], ended: Ended) -> Decision:
    """The outcome of an attempt of ``task`` that ended so (what it raised, what it
    returned): its result stored as JSON, or why it cannot be."""
    failure, value = ended
    result_json = None
    if failure is None:
        try:
            result_json = stored_result(registry, task, value)
        except UnstorableResult as exc:
            failure = exc
    return decide(job, task, failure, result_json)


def runs_on_its_own(
    registry: Registry, job: ClaimedJob, children: ChildPool | None = None
) -> Task[Any, Any] | None:
    """The task of ``job`` when its attempt may run without an asyncio Task of its own
    (``submit_sync``): a sync function on a thread without a timeout, untraced. None:
    ``execute``."""
    if registry.tracing is not None or job.timeout is not None:
        return None
    task = registry.tasks.get(job.task)
    if task is None or task.is_async or task.timeout is not None:
        return None
    if children is not None and children.takes(task):
        return None
    return task


def submit_sync(
    job: ClaimedJob,
    args: list[Any],
    kwargs: dict[str, Any],
    fn: Callable[..., Any],
    pool: SyncPool,
    report: Callable[[int, str], None] | None,
    store: DurableSource | None,
    then: Callable[[Ended], None],
    log: LogBuffer | None = None,
) -> tuple[Work | Any, contextvars.Context]:
    """Run an untimed sync job on the pool without a Task or a Future: its thread calls
    ``then(ended)`` on the loop through the loop's inbox. Per job that saves the loop a
    Task, the coroutines of ``execute`` and a pass to wake them (``runner.py`` has the
    figures). Returns the pool's handle of the call (``cancel``, ``running``) and the
    attempt's context on the loop, where its outcome is decided: ``current_job()`` is the
    job there, as in a Task's (a retry policy may read it: Django's decided retries do);
    its thread runs in a copy, as a Task's sync job does."""
    context = contextvars.copy_context()
    context.run(set_current_job, StartedJob(job, None, report, time.time(), store))
    if log is not None:
        context.run(capture, log)  # its thread runs in a copy: what it logs lands in ``log``
    inbox = handback_for(asyncio.get_running_loop())
    call = functools.partial(_call_catching, fn, args, kwargs)
    return pool.submit(_on_thread_then, inbox, context.copy(), call, then), context


def _on_thread_then(
    inbox: Handback, context: contextvars.Context, call: Callable[[], Ended], then: Any
) -> None:
    """On the job's thread: run it, and hand ``then`` how it ended, on the loop."""
    try:
        ended: Ended = context.run(call)
    except BaseException as exc:  # _call_catching catches the job's; this is for the rest
        ended = exc, None
    inbox.call(then, ended)


def decide(
    job: ClaimedJob,
    task: Task[Any, Any] | None,
    failure: BaseException | None,
    result_json: str | None = None,
) -> Decision:
    """The outcome of an attempt that raised ``failure`` (None: it succeeded)."""
    decision = classify(
        failure,
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        retry=task.retry if task else _NO_TASK_RETRY,
        permanent=task.permanent if task else (),
    )
    if result_json is None:
        return decision
    return dataclasses.replace(decision, result_json=result_json)
