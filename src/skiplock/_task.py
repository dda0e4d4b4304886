"""``Task``: a function plus the options its jobs are enqueued with.

Calling a task calls the function (handy in tests); ``enqueue``/``aenqueue`` write a job row.
The vocabulary follows Django Tasks: ``using(...)`` returns a configured copy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, Literal, ParamSpec, Protocol, TypeVar

from ._backends.workflow_plan import Plan
from ._config import require
from ._job import JobOutcome, JobRecord, NewJob
from ._limits import MAX_PARENTS, check_text
from ._payload import encode_args
from ._task_options import TaskOptions, overrides, seconds_of
from ._typed import Typed, typed_signature
from ._waiting import unwrap
from ._workflow import Signature
from .errors import BlockingCallInLoop, ConfigurationError

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Enqueuing(Protocol):
    """What a ``Task`` and its ``JobHandle`` call on the app that made them (``App`` is one):
    the enqueue, the row and outcome reads a handle makes, and the sync bridge. A protocol,
    so this module knows nothing of the App above it."""

    @property
    def max_payload_bytes(self) -> int: ...

    def lane_for(self, queue: str, task_lane: str | None, key: str | None) -> str: ...

    async def enqueue_many(
        self, jobs: Iterable[NewJob], *, connection: object | None = None
    ) -> list[JobHandle]: ...

    def enqueue_many_sync(
        self, jobs: Iterable[NewJob], *, connection: object | None = None
    ) -> list[JobHandle]: ...

    async def enqueue_plan(
        self, plan: Plan, *, connection: object | None = None
    ) -> list[JobHandle]: ...

    def enqueue_plan_sync(
        self, plan: Plan, *, connection: object | None = None
    ) -> list[JobHandle]: ...

    async def get_job(self, job_id: int) -> JobRecord: ...

    async def wait_for_outcomes(
        self, job_ids: Sequence[int], timeout: float | None = None
    ) -> dict[int, JobOutcome]: ...

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T: ...


@dataclass(slots=True)
class JobHandle:
    """What an enqueue returns: the job's id, and a way to look at it later.

    Not frozen: ``enqueue_many`` builds one per job, and a frozen dataclass's ``__init__``
    costs 0.85 µs a handle against 0.13 (a tenth of the bulk-enqueue budget). Handles still
    hash, by job id.
    """

    id: int
    task: str
    queue: str
    app: Enqueuing = field(repr=False, compare=False)

    def __hash__(self) -> int:
        return hash(self.id)

    async def fetch(self) -> JobRecord:
        """The job row as it is now."""
        return await self.app.get_job(self.id)

    async def progress(self) -> dict[str, Any] | None:
        """The job's last stored progress record (``fraction``, ``message``, ``at``), or None."""
        return (await self.fetch()).progress

    async def result(self, timeout: float | None = None) -> Any:
        """What the job returned, once it succeeded.

        Raises JobFailed (dead: the last error's type, message and traceback), JobCancelled,
        or TimeoutError after ``timeout`` seconds (the job goes on). Woken by the completion
        itself, through the process's one watch, not by polling per handle.
        """
        outcomes = await self.app.wait_for_outcomes([self.id], timeout)
        return self.rebuilt(unwrap(outcomes[self.id]))

    def rebuilt(self, value: Any) -> Any:
        """A result value as its task's return annotation says (``_typed``), when that names
        a pydantic model or a dataclass and this app has the task; else ``value`` itself."""
        return typed_result(self, value)

    def result_sync(self, timeout: float | None = None) -> Any:
        """``result`` for code without an event loop (run on the app's private loop).

        Refused at once with BlockingCallInLoop inside a running event loop: waiting there
        would block that loop (a worker on it could not finish the job) until the timeout."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop running here: the ordinary case
            return self.app._run_sync(self.result(timeout))
        raise BlockingCallInLoop(
            f"job {self.id}: handle.result_sync() inside a running event loop would block it; "
            "use await handle.result()"
        )


def typed_result(handle: JobHandle, value: Any) -> Any:
    """A result as its task's return annotation says, when that names a model and the
    handle's app has the task (else the JSON value as stored)."""
    if value is None:
        return None
    tasks = getattr(handle.app, "tasks", None)  # an Enqueuing that keeps none: the JSON
    task = tasks.get(handle.task) if isinstance(tasks, dict) else None
    if not isinstance(task, Task) or task.typed is None:
        return value
    return task.typed.load_result(value)


@functools.lru_cache(maxsize=4096)
def argument_misfit(
    fn: Callable[..., Any], positional: int, keywords: tuple[str, ...]
) -> str | None:
    """Why a call with this shape cannot bind to ``fn`` (None if it can).

    Binding depends only on how many positional arguments and which keyword names a call has,
    never on the values, so the answer is cached per shape: enqueue and the worker's hot path
    pay a dict lookup. Enqueue asks so a wrong arity is a TypeError before anything is
    written; the worker asks again for rows other producers (or older code) wrote.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*range(positional), **dict.fromkeys(keywords))
    except TypeError as exc:
        return f"arguments do not fit {signature}: {exc}"
    return None


_ON_DUPLICATE = {"keep": "return", "replace": "replace", "reject": "raise"}
"""``on_conflict`` as the insert's word for it (NewJob.on_duplicate)."""


def parent_ids(parents: Iterable[JobHandle | int]) -> tuple[int, ...]:
    """``depends_on``'s job ids (handles or ids), checked: positive ints, at most
    MAX_PARENTS of them, repeats dropped."""
    if isinstance(parents, str | bytes) or not isinstance(parents, Iterable):
        raise ConfigurationError(
            f"depends_on={parents!r}: must be a list of job handles or job ids"
        )
    ids: list[int] = []
    for parent in parents:
        value = parent.id if isinstance(parent, JobHandle) else parent
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
            raise ConfigurationError(
                f"depends_on: {parent!r} is not a job handle or a job id (a positive int)"
            )
        ids.append(value)
    unique = tuple(dict.fromkeys(ids))
    require(
        len(unique) <= MAX_PARENTS,
        "depends_on",
        f"{len(unique)} jobs",
        f"must name at most {MAX_PARENTS} parents",
    )
    return unique


def key_of(
    task: str, key: Callable[..., object], args: Any, kwargs: Any, option: str = "concurrency_key"
) -> str:
    """The concurrency key a function gives for a call's arguments: a clear error naming
    the task when it raises or gives something other than a key (nothing is enqueued)."""
    try:
        value = key(*args, **kwargs)
    except Exception as exc:
        raise ConfigurationError(
            f"task {task!r}: its {option} function raised {type(exc).__name__}: {exc}"
            " (nothing was enqueued)"
        ) from exc
    check_text(f"task {task!r}: {option}", value)
    assert isinstance(value, str)
    return value


@dataclass(frozen=True)
class Task(TaskOptions, Generic[P, R]):
    """A registered function and its enqueue options. Build it with ``@app.task(...)``.

    Its options (``name``, ``queue``, ``priority``, ...) are ``TaskOptions``' fields,
    declared and checked there (``_task_options``); built with keywords."""

    app: Enqueuing = field(repr=False)
    fn: Callable[P, R] = field(repr=False)
    _fitting_shapes: set[object] = field(default_factory=set, init=False, repr=False, compare=False)
    """Call shapes known to bind: prepare's check is one set lookup after the first. A field,
    not a cached_property: a key added to ``__dict__`` after ``__init__`` turns off CPython's
    inline attribute values and cost prepare() 0.27 µs (40 %) on every attribute it reads."""

    is_async: bool = field(init=False, repr=False, compare=False)
    """Whether ``fn`` is a coroutine function (run on the loop, not the thread pool)."""

    typed: Typed | None = field(init=False, repr=False, compare=False)
    """Its parameters and return annotated with pydantic models or dataclasses, validated
    at enqueue and rebuilt at run (``_typed``); None for every other task."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))
        super().__post_init__()  # the options' validation
        object.__setattr__(self, "typed", typed_signature(self.name, self.fn))
        if self.executor == "process":
            self._check_process_task()

    def _check_process_task(self) -> None:
        """A process task is sync and importable by its child (module and name)."""
        if self.is_async:
            raise ConfigurationError(
                f"task {self.name!r}: executor='process' is for sync functions (an async "
                "task runs on the worker's loop; run its blocking part in a sync task)"
            )
        try:
            where_is(self.fn)
        except ValueError as exc:
            raise ConfigurationError(f"task {self.name!r}: {exc}") from None

    def _check_fit(self, positional: int, keywords: tuple[str, ...], shape: object) -> None:
        misfit = argument_misfit(self.fn, positional, keywords)
        if misfit is not None:
            raise TypeError(f"task {self.name!r}: {misfit}")
        self._fitting_shapes.add(shape)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def using(
        self,
        *,
        queue: str | None = None,
        priority: int | None = None,
        run_after: datetime | timedelta | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
        connection: object | None = None,
        correlation_id: str | None = None,
        unique_key: str | Callable[..., str] | None = None,
        on_conflict: Literal["keep", "replace", "reject"] | None = None,
        on_duplicate: Literal["return", "raise"] | None = None,
        unique_while: Literal["live", "live_or_succeeded"] | None = None,
        unique_scope: Literal["task", "shared"] | None = None,
        unique_for: float | timedelta | None = None,
        debounce: float | timedelta | None = None,
        concurrency_key: str | Callable[..., str] | None = None,
        key_limit: int | None = None,
        ordering_key: str | Callable[..., str] | None = None,
        ordering_on_dead: Literal["block", "skip"] | None = None,
        key_weight: int | None = None,
        fair: bool | None = None,
        depends_on: Iterable[JobHandle | int] | None = None,
        on_parent_failure: Literal["cancel", "run", "wait"] | None = None,
        lane: str | None = None,
    ) -> Task[P, R]:
        """A copy whose jobs are enqueued with these options instead."""
        given = locals()  # the parameters by name: the record says which override an option
        if on_conflict is not None and on_duplicate is not None:
            raise ConfigurationError(
                f"on_duplicate={on_duplicate!r}: the older spelling of on_conflict="
                f"{on_conflict!r}; give one of them"
            )
        changes = overrides(given)
        if "depends_on" in changes:
            changes["depends_on"] = parent_ids(changes["depends_on"])
        return dataclasses.replace(self, **changes)

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """A signature: this task with these arguments, to compose into a workflow (``chain``,
        ``group``, ``chord``). In a chain it receives the previous step's result first."""
        return Signature(self, args, kwargs)

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """An immutable signature: in a chain it takes no previous result."""
        return Signature(self, args, kwargs, immutable=True)

    def prepare(self, *args: P.args, **kwargs: P.kwargs) -> NewJob:
        """The job row a call would insert, validated; feed these to ``app.enqueue_many``.

        A call that cannot bind to the function's signature is a TypeError here, before
        anything is written (checked once per call shape, then cached).
        """
        return self.prepare_call(args, kwargs)

    def prepare_call(self, args: Sequence[Any], kwargs: dict[str, Any], leading: int = 0) -> NewJob:
        """``prepare`` for a call whose first ``leading`` positional arguments come later
        (a workflow step's: the previous result, a group's results, a batch's id)."""
        stored_args, stored_kwargs = args, kwargs
        if self.typed is not None:  # models validated and dumped (ArgumentInvalid if not)
            stored_args, stored_kwargs = self.typed.dump_call(self.name, args, kwargs, leading)
        args_json, kwargs_json = encode_args(
            self.name, stored_args, stored_kwargs, self.app.max_payload_bytes
        )
        given = len(args) + leading
        shape = (given, tuple(kwargs)) if kwargs else given
        if shape not in self._fitting_shapes:
            self._check_fit(given, tuple(kwargs), shape)
        run_after = self.run_after
        unique, on_duplicate = self.unique_key, _ON_DUPLICATE[self.on_conflict]
        if unique is not None and not isinstance(unique, str):
            unique = key_of(self.name, unique, args, kwargs, "unique_key")
        if self.debounce is not None:  # the run waits out the window from this enqueue
            unique, on_duplicate = unique or self.name, "replace"
            run_after = timedelta(seconds=seconds_of(self.debounce))
        key, limit, order = self.concurrency_key, self.key_limit, None
        if self.ordering_key is not None:
            key, limit, order = self.ordering_key, 1, self.ordering_on_dead
        if key is not None and not isinstance(key, str):
            option = "concurrency_key" if order is None else "ordering_key"
            key = key_of(self.name, key, args, kwargs, option)
        return NewJob(
            task=self.name,
            queue=self.queue,
            args_json=args_json,
            kwargs_json=kwargs_json,
            priority=self.priority,
            max_attempts=self.max_attempts,
            run_after_s=run_after.total_seconds() if isinstance(run_after, timedelta) else None,
            run_at=run_after if isinstance(run_after, datetime) else None,
            timeout=self.timeout,
            correlation_id=self.correlation_id,
            lease_s=self.visibility_timeout,
            unique_key=unique,
            unique_shared=self.unique_scope == "shared",
            on_duplicate=on_duplicate,
            unique_succeeded=self.unique_while == "live_or_succeeded"
            or self.unique_for is not None,
            unique_for_s=None if self.unique_for is None else seconds_of(self.unique_for),
            debounce=self.debounce is not None,
            payload_version=self.version,
            concurrency_key=key,
            key_limit=limit,
            key_order=order,
            key_weight=self.key_weight if self.fair else 0,
            depends_on=self.depends_on,
            on_parent_failure=self.on_parent_failure,
            lane=self.app.lane_for(self.queue, self.lane, key or unique),
        )

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle:
        """Write one job; with ``using(connection=...)`` it commits with the caller's rows."""
        job = self.prepare(*args, **kwargs)
        (handle,) = await self.app.enqueue_many([job], connection=self.connection)
        return handle

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobHandle:
        """Synchronous ``aenqueue``, for code that has no event loop (or a sync connection)."""
        job = self.prepare(*args, **kwargs)
        (handle,) = self.app.enqueue_many_sync([job], connection=self.connection)
        return handle


def where_is(fn: Callable[..., Any]) -> tuple[str, str]:
    """The module and name a child process imports ``fn`` by, as pickle would (ValueError:
    it cannot: a nested function or a lambda)."""
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or "<locals>" in name or "<lambda>" in name:
        raise ValueError(
            f"{name or fn!r}: a task run in a process must be a module-level function "
            "(its child imports it by module and name)"
        )
    return module, name
