"""``TaskOptions``: every option a task's jobs are enqueued with, declared once.

Each option is one field of the record: its name, type and default (the field), and in its
``metadata`` the facts every edge reads (``Option``): its check at the edge, whether
``@app.task`` declares it, whether ``Task.using`` may override it, how ``skiplock task list``
shows it, and where Django's ``@skiplock_options`` passes it. ``Task`` *is* a ``TaskOptions``
(a subclass adding the function and the app), so ``@app.task`` and ``Task.using`` build the
record, and its ``__post_init__`` is the validation.

``App.task`` and ``Task.using`` keep explicit keyword parameters (what IDEs and mypy show);
``tests/test_task_options.py`` fails when one of them and this record disagree (a name, a
default, a type). A new option: one field here (with its ``Option``), the parameter in those
signatures, and its behaviour (``Task.prepare``, the worker); docs/design.md's recipe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from ._config import DEFAULT_MAX_ATTEMPTS, Breaker, RetryPolicy, require
from ._job_log import MAX_JOB_LOG_BYTES, MIN_JOB_LOG_BYTES
from ._lanes import check_lane_name
from ._limits import (
    MAX_ATTEMPTS,
    MAX_INT,
    MAX_KEY_LIMIT,
    MAX_KEY_WEIGHT,
    check_int,
    check_run_after,
    check_seconds,
    check_text,
)
from .errors import ConfigurationError

Upcast = Callable[[list[Any], dict[str, Any]], tuple[list[Any], dict[str, Any]]]
"""Brings a payload one version up: ``fn(args, kwargs) -> (args, kwargs)``."""

FUNCTION_KEY = "(a function of the arguments)"
"""How ``skiplock task list`` shows a key given as a function of the call's arguments."""

Check = Callable[["TaskOptions", Any], None]
"""An option's own check at the edge: the record (for the task's name) and the value."""
Shown = Callable[[Any, "TaskOptions"], Any]
"""How ``skiplock task list --json`` shows an option's value (the record for context)."""


@dataclass(frozen=True)
class Option:
    """What the edges know of one option, kept in its field's ``metadata["option"]``."""

    check: Check | None = None
    """Its own check (None: none, or its type checks itself, e.g. ``RetryPolicy``); rules
    between options are ``TaskOptions._rules``."""
    declared: bool = True
    """A parameter of ``@app.task`` (False: given per enqueue only, through ``using``)."""
    using: bool = False
    """``Task.using`` may override it (its parameter there defaults to None: unchanged)."""
    given: str | None = None
    """The parameter's annotation at its edge when it is not the field's own (``retry``
    takes None for the default policy), as written there."""
    edge: Callable[[Any], Any] | None = None
    """Turns the edge's argument into the field's value (``retry=None`` -> ``RetryPolicy()``)."""
    listed: str | None = None
    """Its key in ``skiplock task list --json`` (None: not listed)."""
    shown: Shown | None = None
    """How the listing shows the value (None: as it is)."""
    django: Literal["task", "enqueue"] | None = None
    """Whether Django's ``@skiplock_options`` takes it, and where it goes: ``task`` to
    ``app.task(...)`` when the task registers, ``enqueue`` to ``using(...)`` at each enqueue."""


def option(**facts: Any) -> dict[str, Option]:
    """A field's ``metadata`` holding its ``Option``:
    ``field(default=..., metadata=option(...))``."""
    return {"option": Option(**facts)}


def seconds_of(value: float | timedelta) -> float:
    """A window given as seconds or a timedelta, in seconds."""
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


# -- the checks, each an option's own ---------------------------------------------------------


def _lane(options: TaskOptions, value: Any) -> None:
    """A lane's name (``_lanes.NAME_RULE``), or None."""
    if value is not None:
        check_lane_name(f"task {options.name!r}: lane", value)


def _text(name: str, *, of_task: bool = False, optional: bool = False, key: bool = False) -> Check:
    """A label: at most MAX_TEXT_BYTES, no control characters; ``of_task``: its error names
    the task; ``key``: a function of the call's arguments may stand for it."""

    def check(options: TaskOptions, value: Any) -> None:
        if key and callable(value):
            return
        check_text(f"task {options.name!r}: {name}" if of_task else name, value, optional=optional)

    return check


def _int(name: str, minimum: int, maximum: int = MAX_INT, *, optional: bool = False) -> Check:
    def check(options: TaskOptions, value: Any) -> None:
        if value is not None or not optional:
            check_int(name, value, minimum, maximum)

    return check


def _seconds(name: str, **bounds: Any) -> Check:
    """A duration in seconds, or None."""

    def check(options: TaskOptions, value: Any) -> None:
        if value is not None:
            check_seconds(name, value, **bounds)

    return check


def _window(name: str) -> Check:
    """A window (``unique_for``, ``debounce``): None, or > 0 to 10 years as seconds or a
    timedelta."""

    def check(options: TaskOptions, value: Any) -> None:
        if value is not None:
            check_seconds(
                name, value.total_seconds() if isinstance(value, timedelta) else value, open_=True
            )

    return check


def _one_of(name: str, words: tuple[object, ...], rule: str) -> Check:
    def check(options: TaskOptions, value: Any) -> None:
        require(value in words, name, value, rule)

    return check


def _bool(name: str, rule: str) -> Check:
    def check(options: TaskOptions, value: Any) -> None:
        require(isinstance(value, bool), name, value, rule)

    return check


def _check_version(options: TaskOptions, version: Any) -> None:
    require(
        isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= MAX_INT,
        "version",
        version,
        f"must be a whole number from 1 to {MAX_INT}",
    )


def _check_upcast(options: TaskOptions, upcast: Any) -> None:
    """``upcast`` maps versions below ``version`` to callables."""
    version = options.version
    require(isinstance(upcast, dict), "upcast", upcast, "must map versions to functions")
    for old, fn in upcast.items():
        require(
            isinstance(old, int) and not isinstance(old, bool) and 1 <= old < version,
            "upcast",
            old,
            f"keys must be payload versions from 1 to {version - 1} (below version={version})",
        )
        require(callable(fn), f"upcast[{old}]", fn, "must be a function (args, kwargs)")


# -- how ``skiplock task list`` shows a value -------------------------------------------------


def _key(key: object, options: TaskOptions) -> str | None:
    """A key option as listed: its text, None, or FUNCTION_KEY."""
    return key if key is None or isinstance(key, str) else FUNCTION_KEY


def _retry(retry: RetryPolicy, options: TaskOptions) -> dict[str, Any]:
    return {"base_s": retry.base_s, "cap_s": retry.cap_s, "jitter": retry.jitter}


def _permanent(permanent: tuple[type[BaseException], ...], options: TaskOptions) -> list[str]:
    return [f"{e.__module__}.{e.__qualname__}" for e in permanent]


def _breaker(breaker: Breaker | None, options: TaskOptions) -> dict[str, Any] | None:
    if breaker is None:
        return None
    return {
        "threshold": breaker.threshold,
        "window_s": breaker.window_s,
        "cooldown_s": breaker.cooldown_s,
    }


def _seconds_shown(value: float | timedelta | None, options: TaskOptions) -> float | None:
    return None if value is None else seconds_of(value)


def _on_dead_shown(on_dead: str, options: TaskOptions) -> str | None:
    return None if options.ordering_key is None else on_dead


def _job_log_shown(value: bool | None, options: TaskOptions) -> bool | None:
    """The task's own, or its App's when it names none."""
    registry = getattr(getattr(options, "app", None), "registry", None)
    return registry.job_log if value is None and registry is not None else value


def _job_log_bytes_shown(value: int | None, options: TaskOptions) -> int | None:
    registry = getattr(getattr(options, "app", None), "registry", None)
    return registry.job_log_bytes if value is None and registry is not None else value


def _retry_given(retry: RetryPolicy | None) -> RetryPolicy:
    return retry or RetryPolicy()


def _upcast_given(upcast: Mapping[int, Upcast] | None) -> dict[int, Upcast]:
    return dict(upcast) if upcast is not None else {}


@dataclass(frozen=True, kw_only=True)
class TaskOptions:
    """A task's options, each declared once (see the module's docstring); checked when built.

    ``Task`` is this record plus its function and app; build it with ``@app.task(...)``."""

    name: str = field(metadata=option(check=_text("name"), listed="name"))
    queue: str = field(
        default="default",
        metadata=option(check=_text("queue", of_task=True), using=True, listed="queue"),
    )
    priority: int = field(
        default=0,
        metadata=option(check=_int("priority", -MAX_INT - 1), using=True, listed="priority"),
    )
    """Higher runs first."""
    max_attempts: int = field(
        default=DEFAULT_MAX_ATTEMPTS,
        metadata=option(
            check=_int("max_attempts", 1, MAX_ATTEMPTS),
            using=True,
            listed="max_attempts",
            django="task",
        ),
    )
    timeout: float | None = field(
        default=None,
        metadata=option(
            check=_seconds("timeout", open_=True), using=True, listed="timeout_s", django="task"
        ),
    )
    """Seconds one attempt may run; None for no limit (the lease still bounds a crash)."""
    retry: RetryPolicy = field(
        default_factory=RetryPolicy,
        metadata=option(
            given="RetryPolicy | None",
            edge=_retry_given,
            listed="retry",
            shown=_retry,
            django="task",
        ),
    )
    permanent: tuple[type[BaseException], ...] = field(
        default=(), metadata=option(listed="permanent", shown=_permanent, django="task")
    )
    """Exception types that will not improve with a retry: the job goes straight to dead."""
    visibility_timeout: float | None = field(
        default=None,
        metadata=option(
            check=_seconds("visibility_timeout", minimum=0.5),
            listed="visibility_timeout_s",
            django="task",
        ),
    )
    """Seconds a claim is leased for (extended by heartbeats while the worker lives); None
    means the timeout plus the worker's ``lease_margin_s``, or its ``default_lease_s``."""
    breaker: Breaker | None = field(
        default=None, metadata=option(listed="breaker", shown=_breaker, django="task")
    )
    """Pause this task for a cool-down when it fails too often (None: never)."""
    unique_key: str | Callable[..., str] | None = field(
        default=None,
        metadata=option(
            check=_text("unique_key", of_task=True, optional=True, key=True),
            using=True,
            listed="unique_key",
            shown=_key,
            django="enqueue",
        ),
    )
    """While a job holds this key, enqueueing another does what ``on_conflict`` says. A
    string, or a function of the call's arguments giving one."""
    on_conflict: Literal["keep", "replace", "reject"] = field(
        default="keep",
        metadata=option(
            check=_one_of(
                "on_conflict",
                ("keep", "replace", "reject"),
                "must be 'keep', 'replace' or 'reject'",
            ),
            using=True,
            listed="on_conflict",
        ),
    )
    """When a job holds the key: ``keep`` it (its handle is returned), ``replace`` its
    arguments and run time while it is pending, or ``reject`` the enqueue (DuplicateJob)."""
    on_duplicate: Literal["return", "raise"] | None = field(
        default=None, metadata=option(declared=False, using=True, django="enqueue")
    )
    """The older spelling of ``on_conflict``: ``return`` is ``keep``, ``raise`` ``reject``
    (checked and turned into ``on_conflict`` when the record is built)."""
    unique_while: Literal["live", "live_or_succeeded"] = field(
        default="live",
        metadata=option(
            check=_one_of(
                "unique_while",
                ("live", "live_or_succeeded"),
                "must be 'live' or 'live_or_succeeded'",
            ),
            using=True,
            listed="unique_while",
            django="enqueue",
        ),
    )
    """Which jobs hold a key: ``live`` (pending or running) or also ``succeeded`` ones (a job
    that must succeed once; the key frees when retention deletes the row)."""
    unique_scope: Literal["task", "shared"] = field(
        default="task",
        metadata=option(
            check=_one_of(
                "unique_scope",
                ("task", "shared"),
                "must be 'task' (the task's own keys) or 'shared' (one key space for every "
                "task that shares)",
            ),
            using=True,
            listed="unique_scope",
            django="enqueue",
        ),
    )
    """Where the key is unique: among this task's jobs (``task``: another task's job with
    the same key string is another key), or in the one key space every task with
    ``shared`` uses (a job of any of them holds the key for all)."""
    unique_for: float | timedelta | None = field(
        default=None,
        metadata=option(
            check=_window("unique_for"), using=True, listed="unique_for_s", shown=_seconds_shown
        ),
    )
    """A window from the enqueue in which the key stays taken, even after the job succeeded
    (seconds or a timedelta): enqueues of the key within it are deduplicated."""
    debounce: float | timedelta | None = field(
        default=None,
        metadata=option(
            check=_window("debounce"), using=True, listed="debounce_s", shown=_seconds_shown
        ),
    )
    """Gather the enqueues of a key within this window into one run with the last arguments:
    the job runs this long after the last enqueue (the key is ``unique_key``, or the task's
    name)."""
    run_after: datetime | timedelta | None = field(
        default=None,
        metadata=option(check=lambda _, v: check_run_after(v), declared=False, using=True),
    )
    connection: object | None = field(
        default=None, repr=False, compare=False, metadata=option(declared=False, using=True)
    )
    correlation_id: str | None = field(
        default=None,
        metadata=option(
            check=_text("correlation_id", of_task=True, optional=True),
            declared=False,
            using=True,
        ),
    )
    keep_result: bool = field(
        default=True,
        metadata=option(
            check=_bool("keep_result", "must be a bool"), listed="keep_result", django="task"
        ),
    )
    """Store what the function returns on the job row (False: a hot path that needs none)."""
    version: int = field(default=1, metadata=option(check=_check_version, listed="version"))
    """The payload version this code expects; stored on every job it enqueues."""
    upcast: dict[int, Upcast] = field(
        default_factory=dict,
        repr=False,
        compare=False,
        metadata=option(
            check=_check_upcast, given="Mapping[int, Upcast] | None", edge=_upcast_given
        ),
    )
    """Older version -> a function bringing such a payload one version up (see ``Upcast``);
    a worker runs the chain (1 -> 2 -> 3) before the call."""
    concurrency_key: str | Callable[..., str] | None = field(
        default=None,
        compare=False,
        metadata=option(
            check=_text("concurrency_key", of_task=True, optional=True, key=True),
            using=True,
            listed="concurrency_key",
            shown=_key,
        ),
    )
    """Jobs with one key run at most ``key_limit`` at once, everywhere, and claims take from
    keys in turn. A string, or a function of the call's arguments giving one."""
    key_limit: int | None = field(
        default=None,
        metadata=option(
            check=_int("key_limit", 1, MAX_KEY_LIMIT, optional=True),
            using=True,
            listed="key_limit",
        ),
    )
    """How many jobs with one concurrency key may run at once (None: no cap, turns only)."""
    ordering_key: str | Callable[..., str] | None = field(
        default=None,
        compare=False,
        metadata=option(
            check=_text("ordering_key", of_task=True, optional=True, key=True),
            using=True,
            listed="ordering_key",
            shown=_key,
        ),
    )
    """Jobs with one ordering key run one at a time, in the order they were enqueued
    (message groups); a string, or a function of the call's arguments giving one."""
    ordering_on_dead: Literal["block", "skip"] = field(
        default="block",
        metadata=option(
            check=_one_of(
                "ordering_on_dead",
                ("block", "skip"),
                "must be 'block' (the key waits for a person) or 'skip' (the next job runs)",
            ),
            using=True,
            listed="ordering_on_dead",
            shown=_on_dead_shown,
        ),
    )
    """When an ordered job dies: ``block`` its key until a person retries or discards it,
    or ``skip`` it and run the next."""
    key_weight: int | None = field(
        default=None,
        metadata=option(
            check=_int("key_weight", 1, MAX_KEY_WEIGHT, optional=True),
            using=True,
            listed="key_weight",
        ),
    )
    """How many jobs a concurrency key takes each turn (None: 1): a key of weight 3 starts
    three jobs to another's one while both have work."""
    fair: bool = field(
        default=True,
        metadata=option(check=_bool("fair", "must be True or False"), using=True, listed="fair"),
    )
    """Whether a concurrency key's jobs take turns with other keys' (False: its jobs compete
    by priority and age alone; ``key_limit`` still holds)."""
    lane: str | None = field(
        default=None,
        metadata=option(check=_lane, using=True, listed="lane"),
    )
    """The lane this task's jobs go to, whatever their queue's route (None: the queue's;
    several databases, docs/scaling.md). The App refuses a lane its ``lanes=`` does not name."""
    executor: Literal["thread", "process"] | None = field(
        default=None,
        metadata=option(
            check=_one_of(
                "executor", (None, "thread", "process"), "must be 'thread', 'process' or None"
            ),
            listed="executor",
        ),
    )
    """Where a sync task runs: ``"thread"``, a thread of the worker; ``"process"``, a child
    process of the worker's pool, which a timeout kills (docs/guides/processes.md); None: the
    worker's ``sync_executor`` (a thread by default). Async tasks run on the worker's loop."""
    job_log: bool | None = field(
        default=None,
        metadata=option(
            check=_one_of("job_log", (None, True, False), "must be True, False or None"),
            listed="job_log",
            shown=_job_log_shown,
            django="task",
        ),
    )
    """Keep the log records each attempt emits while it runs (through ``logging``) with the
    attempt: ``skiplock job show`` and the dashboard show them (docs/guides/job-logs.md);
    None: the App's ``job_log``."""
    job_log_bytes: int | None = field(
        default=None,
        metadata=option(
            check=_int("job_log_bytes", MIN_JOB_LOG_BYTES, MAX_JOB_LOG_BYTES, optional=True),
            listed="job_log_bytes",
            shown=_job_log_bytes_shown,
            django="task",
        ),
    )
    """The bytes of log one attempt keeps, its tail (the head cut, and said); None: the
    App's ``job_log_bytes`` (64 KiB by default)."""
    depends_on: tuple[int, ...] = field(
        default=(),
        compare=False,
        metadata=option(declared=False, using=True, given="Iterable[JobHandle | int] | None"),
    )
    """Job ids (``using(depends_on=[handle, id, ...])``) the jobs wait for: they are written
    ``waiting`` and become pending once every one of them succeeded."""
    on_parent_failure: Literal["cancel", "run", "wait"] = field(
        default="cancel",
        metadata=option(
            check=_one_of(
                "on_parent_failure", ("cancel", "run", "wait"), "must be 'cancel', 'run' or 'wait'"
            ),
            declared=False,
            using=True,
        ),
    )
    """When a parent ends dead or cancelled: ``cancel`` the job (the reason recorded),
    ``run`` it anyway, or ``wait`` for a person to retry the parent."""

    def __post_init__(self) -> None:
        """The validation: the older spelling ``on_duplicate`` checked and made
        ``on_conflict``, every option's own check in the record's order, then the rules
        between options. Every error a ConfigurationError naming the option."""
        if self.on_duplicate is not None:
            require(
                self.on_duplicate in ("return", "raise"),
                "on_duplicate",
                self.on_duplicate,
                "must be 'return' or 'raise'",
            )
            keep_or_reject = "keep" if self.on_duplicate == "return" else "reject"
            object.__setattr__(self, "on_conflict", keep_or_reject)
            object.__setattr__(self, "on_duplicate", None)
        for name, check in _CHECKS:
            check(self, getattr(self, name))
        self._rules()

    def _rules(self) -> None:
        """The rules between options: those that contradict each other are refused, naming
        both."""
        _ordering_rules(self)
        _key_rules(self)
        _dependency_rules(self)
        _unique_rules(self)


def _ordering_rules(task: TaskOptions) -> None:
    """``ordering_key`` alone: its jobs run one at a time already (no ``concurrency_key`` or
    ``key_limit`` beside it)."""
    key = task.ordering_key
    if key is None:
        return
    require(
        task.concurrency_key is None and task.key_limit is None,
        "ordering_key",
        "..." if callable(key) else key,
        "runs its key's jobs one at a time: give it without concurrency_key= or key_limit=",
    )


def _key_rules(task: TaskOptions) -> None:
    """``key_limit``, ``key_weight`` and ``fair`` are about a concurrency key, so only with
    one, and a weight only while the key takes turns."""
    if task.key_limit is not None:
        require(
            task.concurrency_key is not None,
            "key_limit",
            task.key_limit,
            "limits the jobs of one concurrency key: give concurrency_key= too",
        )
    if task.key_weight is not None:
        require(
            task.concurrency_key is not None,
            "key_weight",
            task.key_weight,
            "weighs the turns of one concurrency key: give concurrency_key= too",
        )
        require(
            task.fair,
            "key_weight",
            task.key_weight,
            "weighs turns, which fair=False turns off: give one of them",
        )
    if not task.fair:
        require(
            task.concurrency_key is not None,
            "fair",
            task.fair,
            "turns a concurrency key's turns off: give concurrency_key= too",
        )


def _dependency_rules(task: TaskOptions) -> None:
    """A job with parents holds no unique key or ordering key (a job waiting for its parents
    holds no key: nothing of it ran yet)."""
    if not task.depends_on:
        return
    for name in ("unique_key", "debounce", "ordering_key"):
        if getattr(task, name) is not None:
            raise ConfigurationError(
                f"{name}= with depends_on: a job that waits for parents cannot hold a "
                f"{name.replace('_', ' ')} (enqueue it without one, or without depends_on)"
            )


def _unique_rules(task: TaskOptions) -> None:
    """What a scope, a window or a debounce needs of the unique key and of each other."""
    require(
        task.unique_scope == "task" or task.unique_key is not None or task.debounce is not None,
        "unique_scope",
        task.unique_scope,
        "is where a unique key is unique: give unique_key= (or debounce=) too",
    )
    if task.unique_for is not None:
        require(
            task.unique_key is not None,
            "unique_for",
            task.unique_for,
            "keeps a unique key taken for a while: give unique_key= too",
        )
        require(
            task.unique_while == "live",
            "unique_for",
            task.unique_for,
            "bounds how long a succeeded job keeps its key; unique_while='live_or_succeeded' "
            "keeps it until retention: give one of them",
        )
    if task.debounce is None:
        return
    for name, given in (
        ("run_after", task.run_after),
        ("unique_for", task.unique_for),
        ("unique_while", None if task.unique_while == "live" else task.unique_while),
        ("on_conflict", None if task.on_conflict != "reject" else task.on_conflict),
    ):
        require(
            given is None,
            "debounce",
            task.debounce,
            f"runs the job a window after the last enqueue with its arguments: "
            f"give it without {name}={given!r}",
        )


def options() -> Iterator[tuple[dataclasses.Field[Any], Option]]:
    """Every option in the record's order: its field (name, type, default) and its facts."""
    for f in dataclasses.fields(TaskOptions):
        yield f, f.metadata["option"]


_CHECKS: tuple[tuple[str, Check], ...] = tuple(
    (f.name, o.check) for f, o in options() if o.check is not None
)
DECLARED: frozenset[str] = frozenset(f.name for f, o in options() if o.declared)
"""The options ``@app.task`` takes (its parameters, besides the function)."""
USING: frozenset[str] = frozenset(f.name for f, o in options() if o.using)
"""The options ``Task.using`` may override."""
_EDGES: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
    (f.name, o.edge) for f, o in options() if o.edge is not None and o.declared
)


def declared(given: Mapping[str, Any]) -> dict[str, Any]:
    """``@app.task``'s arguments (its parameters by name, e.g. its ``locals()``) as the
    record's fields: the declared options only, each edge's conversion applied (``retry=None``
    is the default policy); ``name`` as given (the App names a task from its function)."""
    fields = {name: given[name] for name in DECLARED}
    for name, edge in _EDGES:
        fields[name] = edge(fields[name])
    return fields


def overrides(given: Mapping[str, Any]) -> dict[str, Any]:
    """``Task.using``'s arguments (its parameters by name) that override an option: the
    ones given, None being "unchanged"."""
    return {name: given[name] for name in USING if given[name] is not None}


def listing(task: TaskOptions) -> dict[str, Any]:
    """A task's listed options in ``skiplock task list --json``'s words, in the record's
    order (the command orders the keys it prints)."""
    listed: dict[str, Any] = {}
    for f, o in options():
        if o.listed is not None:
            value = getattr(task, f.name)
            listed[o.listed] = value if o.shown is None else o.shown(value, task)
    return listed


def django_options(where: Literal["task", "enqueue"]) -> frozenset[str]:
    """The options Django's ``@skiplock_options`` takes that go ``where``."""
    return frozenset(f.name for f, o in options() if o.django == where)
