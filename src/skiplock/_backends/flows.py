"""The multi-statement operations both dialects run, written once as step generators.

A flow is the algorithm of one transaction: it yields a step (a small request such as
``LockQueue``), receives the step's answer, and returns the operation's result. It does no
I/O, so the same flow runs on SQLite's thread (``drive``) and on an asyncpg connection
(``drive_async``); each dialect only answers steps with its own statements.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from .._job import NewJob, SlotOutcome
from .claim_rules import allowed_starts
from .params import ClaimParams, CronSlotClaimParams
from .unique_keys import KeyId, key_id

R = TypeVar("R")
Flow = Generator[Any, Any, R]
"""Yields steps, is sent each step's answer, returns the operation's result."""


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """A limited queue's settings row, locked for the rest of the transaction."""

    max_running: int | None
    rate_per_s: float | None
    paused: bool
    recent_starts: Sequence[float]
    now: float
    """The database clock's now, in Unix seconds, read under the lock."""
    aging_s: float | None = None
    """Priority aging: the queue's claim ranks by ``priority + floor(wait / aging_s)``."""

    @property
    def limited(self) -> bool:
        """Whether a global limit holds (else the lock serves the aged order alone)."""
        return self.max_running is not None or self.rate_per_s is not None


@dataclass(frozen=True, slots=True)
class LockQueue:
    """-> QueueLimits, or None when the queue has no settings row."""

    queue: str


@dataclass(frozen=True, slots=True)
class CountRunning:
    """-> how many of the queue's jobs run anywhere."""

    queue: str


@dataclass(frozen=True, slots=True)
class ClaimFromQueue:
    """-> the rows claimed (the ordinary claim, restricted to ``queue``, at ``now``; by
    effective priority when ``aging_s`` is set)."""

    queue: str
    params: ClaimParams
    now: float
    aging_s: float | None = None


@dataclass(frozen=True, slots=True)
class ClaimKeyedFromQueue:
    """-> the rows claimed by the keyed claim (each key within its limit), restricted to
    ``queue``, after its ordinary jobs."""

    queue: str
    params: ClaimParams


@dataclass(frozen=True, slots=True)
class SetStarts:
    """-> None; the queue's start times within its rate's window."""

    queue: str
    starts: list[float]


def limited_claim(params: ClaimParams) -> Flow[list[Any]]:
    """Claim from a queue (``params.queues``: exactly one) with a global ``max_running`` or
    rate, or priority aging, under its settings row's lock, so that concurrent claimers
    anywhere cannot exceed either limit, and each takes the aged order it read.

    A queue that only ages leaves its keyed jobs to the ordinary keyed claim (which ranks
    by priority alone): no limit of the queue's needs the lock for them."""
    if params.queues is None or len(params.queues) != 1:
        raise ValueError(f"queues={params.queues!r}: a limited claim names exactly one queue")
    (queue,) = params.queues
    limits: QueueLimits | None = yield LockQueue(queue)
    if limits is None or limits.paused:
        return []
    running: int = (yield CountRunning(queue)) if limits.max_running is not None else 0
    starts, recent = allowed_starts(
        params.limit,
        limits.max_running,
        running,
        limits.rate_per_s,
        limits.recent_starts,
        limits.now,
    )
    if starts <= 0:
        return []
    claim = dataclasses.replace(params, limit=starts)
    rows: list[Any] = yield ClaimFromQueue(queue, claim, limits.now, limits.aging_s)
    # its keyed jobs: the queue's limits and their keys' both hold (an aging queue's are the
    # ordinary keyed claim's)
    if len(rows) < starts and limits.limited:
        keyed = dataclasses.replace(params, limit=starts - len(rows))
        rows = [*rows, *(yield ClaimKeyedFromQueue(queue, keyed))]
    if limits.rate_per_s is not None and rows:
        yield SetStarts(queue, recent + [limits.now] * len(rows))
    return rows


@dataclass(frozen=True, slots=True)
class InsertSlot:
    """-> whether this transaction took (schedule, slot): False if another had it."""

    schedule: str
    slot: datetime


@dataclass(frozen=True, slots=True)
class PreviousRunLive:
    """-> whether a job this schedule enqueued is still pending or running."""

    schedule: str


@dataclass(frozen=True, slots=True)
class InsertJob:
    """-> the new job's id."""

    job: NewJob


@dataclass(frozen=True, slots=True)
class SetSlotOutcome:
    """-> None; what the claimed slot did."""

    schedule: str
    slot: datetime
    job_id: int | None
    skipped: bool


def cron_slot(params: CronSlotClaimParams) -> Flow[tuple[SlotOutcome, int | None]]:
    """Claim (schedule, slot) under its unique key and enqueue the job in one transaction;
    a failed enqueue rolls the claim back, so the slot can be tried again."""
    schedule, slot, job, overlap = params.schedule, params.slot, params.job, params.overlap
    if not (yield InsertSlot(schedule, slot)):
        return SlotOutcome.TAKEN, None
    if not overlap and (yield PreviousRunLive(schedule)):
        yield SetSlotOutcome(schedule, slot, None, True)
        return SlotOutcome.SKIPPED, None
    job_id: int = yield InsertJob(job)
    yield SetSlotOutcome(schedule, slot, job_id, False)
    return SlotOutcome.ENQUEUED, job_id


@dataclass(frozen=True, slots=True)
class InsertUnique:
    """-> the new job's id, or None when a job holds its unique key."""

    job: NewJob


@dataclass(frozen=True, slots=True)
class HolderOf:
    """-> the id of the job holding ``key`` in ``scope`` now (a window that has passed holds
    nothing), or None."""

    key: str
    scope: str


@dataclass(frozen=True, slots=True)
class ReplacePending:
    """-> whether ``holder``, still pending with the job's key and of the job's task, took
    the job's arguments and run time (False: it started, finished or moved meanwhile, or it
    is another task's job in the shared key space)."""

    job: NewJob
    holder: int


@dataclass(frozen=True, slots=True)
class ReleaseRunning:
    """-> whether ``holder``, running with the job's key and of the job's task, gave the key
    up (its ``unique_key`` cleared), so a new job may take it. Another task's job never
    does: it read its own arguments, not older ones of this task."""

    job: NewJob
    holder: int


@dataclass(frozen=True, slots=True)
class ReplaceKey:
    """-> the id of the pending job of the job's task holding the job's key, which took the
    job's arguments and run time; None when no such job holds it."""

    job: NewJob


REPLACE_TRIES = 8
"""How often ``replace_held`` looks again when the holder changes under it (each change is
another enqueue, a claim or a finish that won a race on the key)."""


def replace_held(job: NewJob, holder: int | None) -> Flow[int]:
    """``on_conflict="replace"`` for a job whose key ``holder`` held at the insert: the id
    the enqueue answers with.

    A pending holder of the job's task takes the job's arguments and run time (so one run
    does the latest work). A running or succeeded one is kept, except by a debounce: a
    running holder of the task gives its key up and the job is written anew (the window's
    last arguments must run, and the running job already read older ones). A holder of
    another task (the shared key space) is kept whatever its state: its function never runs
    with this task's arguments, and its key is never taken from it. The holder can start,
    finish or change between steps; each step checks the state it acts on, and a lost race
    looks again.
    """
    key, scope = _key_of(job)
    current: int | None = holder
    for _ in range(REPLACE_TRIES):
        if current is None:
            created: int | None = yield InsertUnique(job)
            if created is not None:
                return created
        elif (yield ReplacePending(job, current)):
            return current
        elif job.debounce and (yield ReleaseRunning(job, current)):
            current = None
            continue
        seen: int | None = yield HolderOf(key, scope)
        if seen is not None and seen == current:
            return seen  # running (no debounce) or succeeded within its window: kept
        current = seen
    if current is None:
        raise RuntimeError(f"unique_key {key!r}: the key changed hands {REPLACE_TRIES} times")
    return current


def replace_first(job: NewJob) -> Flow[int]:
    """``on_conflict="replace"`` for one job on its own: the pending holder is replaced first
    (one statement: a burst of debounced enqueues finds one almost every time), else the job
    is inserted, else ``replace_held`` deals with the holder the insert found."""
    replaced: int | None = yield ReplaceKey(job)
    if replaced is not None:
        return replaced
    created: int | None = yield InsertUnique(job)
    if created is not None:
        return created
    holder: int | None = yield HolderOf(*_key_of(job))  # None: gone since, insert again
    return (yield from replace_held(job, holder))


def _key_of(job: NewJob) -> KeyId:
    """The (key, scope) a replacing job holds or waits for."""
    key = key_id(job)
    assert key is not None, job
    return key


def drive(flow: Flow[R], answer: Callable[[Any], Any]) -> R:
    """Run a flow with a synchronous answerer (SQLite's thread)."""
    try:
        step = next(flow)
        while True:
            step = flow.send(answer(step))
    except StopIteration as done:
        result: R = done.value
        return result


async def drive_async(flow: Flow[R], answer: Callable[[Any], Awaitable[Any]]) -> R:
    """Run a flow with an asynchronous answerer (an asyncpg connection)."""
    try:
        step = next(flow)
        while True:
            step = flow.send(await answer(step))
    except StopIteration as done:
        result: R = done.value
        return result
