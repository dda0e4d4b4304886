"""Sync tasks in child processes a timeout can kill (issue 47, ``executor="process"``).

Why: a sync task on a thread that runs past its timeout is recorded as timed out, but the
thread cannot be stopped; it keeps running, holding its memory, connections and locks, and a
leak or a crashing C extension takes the whole worker with it. A task marked
``executor="process"`` (or every sync task of a worker started with ``sync_executor=
"process"``) runs in a child process of the worker's own pool instead:

- **A timeout kills the child**: SIGTERM, then SIGKILL after ``kill_grace_s``. The outcome is
  written once the child is gone (a retry never overlaps the attempt it replaces), as a
  ``JobTimeout`` that says how it was killed; the pool starts another child.
- **Children are recycled** after ``max_tasks_per_child`` jobs, or once their resident memory
  (read by the child after each job) passes ``max_memory_per_child``: the job that crossed the
  line finishes first, the next job gets a fresh child.
- **A child that dies on its own** (``os._exit``, a signal, the kernel's OOM killer) fails
  only its job, naming the exit code or the signal (``ChildDied``); the lease is the
  worker's, so nothing is stranded.
- **What crosses** is what the job table holds: the arguments as their JSON, the result as
  the JSON it is stored as (a result that cannot be stored fails in the child, as on a
  thread). ``current_job()``, progress, durable steps, ``wait_for`` and parent results work
  in the child: their calls come back over the pipe and run on the worker's loop, on its
  backend, fenced by the job's lease as always.

Children are started with ``spawn`` (a fork of a process running an event loop and threads
is unsafe) and find the task's function by its module and name, as pickle would: a process
task must be a module-level function. Each child is served by a reader thread of the worker
that posts what the child says to the loop, so the loop never blocks on a pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from .. import _job_log as job_log
from .._job_log import LogBuffer, capture
from .._task import where_is

log = logging.getLogger("skiplock.worker")

SPAWN = multiprocessing.get_context("spawn")

DEFAULT_KILL_GRACE_S = 5.0
"""How long a child told to stop (SIGTERM) by a timeout may take before it is SIGKILLed."""

START_TIMEOUT_S = 120.0
"""How long a new child may take to start (import skiplock) before it is given up on."""

DURABLE_CALLS = frozenset(
    {
        "workflow_step_get",
        "workflow_step_put",
        "workflow_signal_take",
        "workflow_wait_prepare",
        "workflow_parent_results",
    }
)
"""The backend calls a child's durable operations may make through the worker (its steps,
waits and parent results): nothing else crosses back."""


class ChildDied(Exception):
    """The child process running the job died under it (a signal, an exit of its own): only
    this job fails; the pool starts another child."""


class ChildFailure(Exception):
    """An exception raised in the child that could not cross back as itself (it does not
    pickle): its type, message and traceback as text."""


def death_of(exitcode: int | None) -> str:
    """How a child ended, in words: ``killed by SIGSEGV``, ``exited with code 3``."""
    if exitcode is None:
        return "ended without an exit code"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


@dataclass(frozen=True, slots=True)
class ChildLimits:
    """What the pool is sized and recycled by (``WorkerConfig``'s process fields)."""

    size: int
    max_tasks_per_child: int | None = None
    max_memory_per_child: int | None = None
    """Bytes of resident memory past which a child is replaced after its job."""
    kill_grace_s: float = DEFAULT_KILL_GRACE_S


@dataclass
class _Running:
    """The job a child runs now: the futures its messages settle."""

    started: asyncio.Future[None]
    done: asyncio.Future[tuple[BaseException | None, str | None, int]]
    report: Callable[[int, str], None] | None
    store: Any
    log: Any = None
    """The attempt's ``LogBuffer`` (its task keeps logs), which the child's lines join."""


@dataclass
class Child:
    """One child process and the worker's side of its pipe."""

    process: Any
    conn: Connection
    loop: asyncio.AbstractEventLoop
    handle: Callable[[Child, tuple[Any, ...]], None]
    ended: asyncio.Future[int | None] = field(init=False)
    ready: asyncio.Future[None] = field(init=False)
    killing: str = ""
    """How a kill was begun ("SIGTERM", then "SIGKILL"), if one was."""

    def __post_init__(self) -> None:
        self.jobs = 0
        """Jobs it ran to their end."""
        self.rss = 0
        """Its resident bytes after its last job, as it read them."""
        self.running: _Running | None = None
        self.ended = self.loop.create_future()
        """Settled with its exit code once it is gone (its reader thread joined it)."""
        self.ready = self.loop.create_future()

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def send(self, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(OSError, ValueError):  # gone: its reader thread says so
            self.conn.send(message)


class ChildPool:
    """The worker's child processes for process tasks, started as jobs need them."""

    def __init__(
        self, limits: ChildLimits, default: str = "thread", log_level: int | None = None
    ) -> None:
        self.limits = limits
        self.default = default
        """The worker's ``sync_executor``: where a sync task naming none runs."""
        self.log_level = log_level if log_level is not None else logging.getLogger().level
        self._idle: list[Child] = []
        self._all: set[Child] = set()
        self._slots = asyncio.Semaphore(limits.size)
        self._closing = False
        self._calls: set[asyncio.Future[None]] = set()
        """Durable calls of children in flight (kept: a bare future may be collected)."""
        self.started = 0
        """Children started so far (a test reads how many were replaced)."""
        self.recycled = 0

    def takes(self, task: Any) -> bool:
        """Whether ``task`` runs here: a sync task naming ``"process"``, or naming none on a
        worker whose ``sync_executor`` is ``"process"``."""
        if task.is_async:
            return False
        return bool(
            task.executor == "process" or (task.executor is None and self.default == "process")
        )

    def children(self) -> list[tuple[int, int, int]]:
        """(pid, jobs run, resident bytes) of each live child."""
        return sorted((c.pid, c.jobs, c.rss) for c in self._all)

    async def run(
        self,
        fn: Callable[..., Any],
        job: Any,
        args_json: str,
        kwargs_json: str,
        timeout: float | None,
        report: Callable[[int, str], None] | None,
        store: Any,
        max_result_bytes: int,
        keep: bool = True,
        log: Any = None,
    ) -> tuple[BaseException | None, str | None]:
        """Run ``fn`` for ``job`` in a child: what it raised (None on success) and its result
        as stored JSON. Raises only the caller's cancellation (the child is then killed)."""
        module, name = where_is(fn)
        async with self._slots:
            child = await self._take()
            loop = asyncio.get_running_loop()
            running = _Running(loop.create_future(), loop.create_future(), report, store, log)
            child.running = running
            cap = None if log is None else log.cap  # the child keeps the tail within it too
            child.send(
                (
                    "run",
                    *(job, module, name, args_json, kwargs_json, timeout, max_result_bytes, keep),
                    cap,
                )
            )
            try:
                return await self._outcome(child, running, timeout)
            except asyncio.CancelledError:
                self._kill(child, "SIGTERM")  # shutdown past its grace, or a person's cancel
                raise
            finally:
                child.running = None
                self._give_back(child)

    async def _outcome(
        self, child: Child, running: _Running, timeout: float | None
    ) -> tuple[BaseException | None, str | None]:
        first = (running.started, running.done, child.ended)
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        if timeout is not None and not (child.ended.done() or running.done.done()):
            try:
                async with asyncio.timeout(timeout):  # from the code's start, as on a thread
                    await asyncio.wait(
                        (running.done, child.ended), return_when=asyncio.FIRST_COMPLETED
                    )
            except TimeoutError:
                self._kill(child, "SIGTERM")
                await asyncio.shield(child.ended)  # the outcome only once it is gone
                return (
                    _job_timeout(
                        f"timed out after {timeout}s: its process (pid {child.pid}) was "
                        f"killed ({child.killing})"
                    ),
                    None,
                )
        else:
            await asyncio.wait((running.done, child.ended), return_when=asyncio.FIRST_COMPLETED)
        if running.done.done():
            failure, result_json, rss = running.done.result()
            child.jobs += 1
            child.rss = rss
            return failure, result_json
        code = child.ended.result()
        return ChildDied(f"its process (pid {child.pid}) {death_of(code)} while it ran"), None

    async def _take(self) -> Child:
        while self._idle:
            child = self._idle.pop()
            if not child.ended.done():
                return child
        return await self._start()

    def _give_back(self, child: Child) -> None:
        if child.ended.done() or child.killing:
            self._all.discard(child)
            return
        limits = self.limits
        why = ""
        if limits.max_tasks_per_child is not None and child.jobs >= limits.max_tasks_per_child:
            why = f"after {child.jobs} jobs (max_tasks_per_child)"
        elif limits.max_memory_per_child is not None and child.rss > limits.max_memory_per_child:
            why = f"at {child.rss / 2**20:.0f} MiB resident (max_memory_per_child)"
        if why or self._closing:
            if why:
                self.recycled += 1
                log.info("child process %d replaced %s", child.pid, why)
            self._retire(child)
            return
        self._idle.append(child)

    async def _start(self) -> Child:
        loop = asyncio.get_running_loop()
        ours, theirs = SPAWN.Pipe()
        process = SPAWN.Process(
            target=child_main,
            args=(theirs, self.log_level),
            name="skiplock-child",
            daemon=True,
        )
        process.start()
        theirs.close()
        child = Child(process, ours, loop, self._handle)
        self._all.add(child)
        self.started += 1
        threading.Thread(
            target=_read, args=(child,), name=f"skiplock-child-{process.pid}", daemon=True
        ).start()
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                await asyncio.wait((child.ready, child.ended), return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            self._kill(child, "SIGKILL")
            raise ChildDied(f"a child process did not start within {START_TIMEOUT_S:g}s") from None
        if child.ended.done():
            raise ChildDied(f"a child process {death_of(child.ended.result())} as it started")
        return child

    def _retire(self, child: Child) -> None:
        """An idle child leaves: told to exit (it finishes nothing: it runs nothing)."""
        self._all.discard(child)
        child.send(("exit",))

    def _kill(self, child: Child, how: str) -> None:
        """SIGTERM, then SIGKILL after the grace unless it is gone by then."""
        if child.ended.done():
            return
        child.killing = child.killing or how
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL if how == "SIGKILL" else signal.SIGTERM)
        if how != "SIGKILL":
            child.loop.call_later(self.limits.kill_grace_s, self._kill_hard, child)

    def _kill_hard(self, child: Child) -> None:
        if not child.ended.done():
            child.killing = f"SIGTERM, then SIGKILL after {self.limits.kill_grace_s:g}s"
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)

    async def close(self, timeout: float = 10.0) -> None:
        """Every child told to exit; one not gone within ``timeout`` is killed."""
        self._closing = True
        for child in list(self._idle):
            self._retire(child)
        self._idle.clear()
        live = [c for c in list(self._all) if not c.ended.done()]
        for child in live:
            if child.running is None:
                child.send(("exit",))
        ends = [c.ended for c in live]
        if ends:
            _, late = await asyncio.wait(ends, timeout=timeout)
            for child in live:
                if not child.ended.done():
                    self._kill(child, "SIGKILL")
            if late:
                await asyncio.wait(late, timeout=5.0)
        self._all.clear()

    # -- on the worker's loop, from a reader thread -------------------------------------------

    def _handle(self, child: Child, message: tuple[Any, ...]) -> None:
        kind = message[0]
        running = child.running
        if kind == "ready":
            if not child.ready.done():
                child.ready.set_result(None)
        elif kind == "started" and running is not None:
            if not running.started.done():
                running.started.set_result(None)
        elif kind == "done" and running is not None:
            if not running.done.done():
                if running.log is not None and message[4] is not None:
                    running.log.extend(*message[4])  # what the job logged in the child
                running.done.set_result((_failure(message[1]), message[2], message[3]))
        elif kind == "progress" and running is not None and running.report is not None:
            running.report(message[1], message[2])
        elif kind == "call":
            call = asyncio.ensure_future(self._call(child, running, *message[1:4]))
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)

    async def _call(
        self, child: Child, running: _Running | None, call_id: int, method: str, params: Any
    ) -> None:
        """A durable operation of the child's job, on the worker's backend."""
        try:
            if running is None or running.store is None or method not in DURABLE_CALLS:
                raise RuntimeError(f"{method}: not available to this child's job")
            value = await getattr(running.store.store, method)(params)
            child.send(("reply", call_id, True, value))
        except Exception as exc:
            child.send(("reply", call_id, False, _crossing(exc)))


def _read(child: Child) -> None:
    """The reader thread: each message to the loop; at the pipe's end, the exit code."""
    while True:
        try:
            message = child.conn.recv()
        except (EOFError, OSError):
            break
        except Exception:  # an unpicklable message: the child is broken
            log.exception("child process %d sent what could not be read", child.pid)
            break
        try:
            child.loop.call_soon_threadsafe(child.handle, child, message)
        except RuntimeError:  # the loop is closed
            break
    child.process.join()
    code = child.process.exitcode
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        child.loop.call_soon_threadsafe(_settle, child.ended, code)


def _settle(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _job_timeout(message: str) -> BaseException:
    from .classify import JobTimeout

    return JobTimeout(message)


# -- what crosses the pipe -----------------------------------------------------------------------


def _crossing(exc: BaseException) -> tuple[str, Any, str]:
    """An exception as it crosses: pickled if it comes back as itself, else its text; with
    the child's frames as text (a traceback does not pickle), for the job's error record."""
    from .._outcomes import Parked

    frames = "".join(traceback.format_tb(exc.__traceback__))
    frames = f"Traceback (most recent call last), in child process {os.getpid()}:\n{frames}"
    if isinstance(exc, Parked):
        return ("parked", (exc.name, exc.timeout_s), frames)
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
        return ("pickled", data, frames)
    except Exception:
        return ("text", (f"{type(exc).__module__}.{type(exc).__qualname__}", str(exc)), frames)


def _failure(crossed: tuple[str, Any, str] | None) -> BaseException | None:
    """The exception a child's job raised, rebuilt on the worker's side, its child's frames
    kept as ``child_traceback`` (``_attempt.error_record`` records them)."""
    if crossed is None:
        return None
    kind, data, frames = crossed
    failure: BaseException
    if kind == "parked":
        from .._outcomes import Parked

        failure = Parked(*data)
    elif kind == "pickled":
        failure = pickle.loads(data)
    else:
        type_name, message = data
        failure = ChildFailure(f"{type_name}: {message}")
    with contextlib.suppress(AttributeError, TypeError):  # an exception without a __dict__
        failure.child_traceback = frames  # type: ignore[attr-defined]
    return failure


# -- the child -----------------------------------------------------------------------------------


class _Proxy:
    """The child's stand-in for the worker's backend: each durable call crosses the pipe and
    waits for the worker's answer (on the child's own loop thread)."""

    def __init__(self, conn: Connection, lock: threading.Lock) -> None:
        self._conn, self._lock = conn, lock
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[tuple[bool, Any]]] = {}

    def __getattr__(self, method: str) -> Callable[[Any], Any]:
        if method not in DURABLE_CALLS:
            raise AttributeError(method)

        async def call(params: Any) -> Any:
            call_id = next(self._ids)
            future = asyncio.get_running_loop().create_future()
            self._waiting[call_id] = future
            with self._lock:
                self._conn.send(("call", call_id, method, params))
            ok, value = await future
            if ok:
                return value
            failure = _failure(value)
            assert failure is not None
            raise failure

        return call

    def answered(self, call_id: int, ok: bool, value: Any) -> None:
        future = self._waiting.pop(call_id, None)
        if future is not None and not future.done():
            future.set_result((ok, value))


def _resident_bytes() -> int:
    """This process's resident memory now (Linux's /proc; elsewhere its peak)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def _function(module: str, name: str) -> tuple[Callable[..., Any], Any]:
    """The function a job runs, and its Task (None if the module holds the bare function):
    the Task's typed arguments and result are rebuilt and dumped here, as on a thread."""
    if module == "__main__" and "__mp_main__" in sys.modules:
        found: Any = sys.modules["__mp_main__"]
    else:
        found = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    fn = getattr(found, "fn", found)  # the module holds the Task; its function runs
    if not callable(fn):
        raise TypeError(f"{module}.{name} is not a function")
    return fn, found if fn is not found else None


def child_main(conn: Connection, log_level: int) -> None:
    """A child's life: say it is ready, then run jobs one at a time until told to exit (or
    the pipe ends: the worker is gone)."""
    logging.basicConfig(
        level=log_level, format="%(asctime)s %(levelname)s %(name)s [child %(process)d] %(message)s"
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the worker's to handle
    lock = threading.Lock()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="skiplock-child-loop", daemon=True).start()
    proxy = _Proxy(conn, lock)
    conn.send(("ready", os.getpid()))
    jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
    threading.Thread(target=_listen, args=(conn, jobs, proxy, loop), daemon=True).start()
    while True:
        message = jobs.get()
        if message is None:
            break
        _run_one(conn, lock, loop, proxy, message)
    with contextlib.suppress(Exception):
        conn.close()


def _listen(
    conn: Connection,
    jobs: queue.SimpleQueue[tuple[Any, ...] | None],
    proxy: _Proxy,
    loop: asyncio.AbstractEventLoop,
) -> None:
    """The child's pipe: jobs to the main thread, answers to the waiting durable calls."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            jobs.put(None)
            return
        if message[0] == "run":
            jobs.put(message)
        elif message[0] == "reply":
            loop.call_soon_threadsafe(proxy.answered, message[1], message[2], message[3])
        else:  # "exit"
            jobs.put(None)
            return


def _run_one(
    conn: Connection,
    lock: threading.Lock,
    loop: asyncio.AbstractEventLoop,
    proxy: _Proxy,
    message: tuple[Any, ...],
) -> None:
    from .._durable import DurableSource
    from .._job import StartedJob, set_current_job
    from .._payload import decode_args, encode_result
    from ..errors import PayloadError
    from .classify import UnstorableResult

    _, job, module, name, args_json, kwargs_json, timeout, max_result_bytes, keep, cap = message
    log = _child_log(cap)

    def send(reply: tuple[Any, ...]) -> None:
        with lock:
            conn.send(reply)

    def report(job_id: int, record: str) -> None:
        send(("progress", job_id, record))

    failure: tuple[str, Any, str] | None = None
    result_json = None
    try:
        fn, task = _function(module, name)
        args, kwargs = decode_args(args_json, kwargs_json)
        typed = getattr(task, "typed", None)
        if typed is not None:  # validated on the worker's side already
            args, kwargs = typed.load_call(job.task, args, kwargs)
        store = DurableSource(proxy, max_result_bytes, loop)
        set_current_job(StartedJob(job, timeout, report, time.time(), store))
        send(("started",))
        value = fn(*args, **kwargs)
        if value is not None and keep:
            try:
                if typed is not None:
                    value = typed.dump_result(job.task, value)
                result_json = encode_result(job.task, value, max_result_bytes)
            except (TypeError, PayloadError) as exc:  # dead, as on a thread (stored_result)
                raise UnstorableResult(str(exc)) from exc
    except BaseException as exc:  # the job's failure, never the child's end
        failure = _crossing(exc)
    lines = None
    if log is not None:
        capture(None)
        lines = log.raw()
    send(("done", failure, result_json, _resident_bytes(), lines))


def _child_log(cap: int | None) -> Any:
    """The attempt's log in the child (its task keeps logs: ``cap`` bytes), captured from
    here on; its lines go back with the "done" message."""
    if cap is None:
        return None
    job_log.install_once()
    log = LogBuffer(cap)
    capture(log)
    return log
