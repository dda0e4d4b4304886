"""A completion's decisions, written once above the dialect: which statement writes a batch
of outcomes, the fallback when its own release is refused, the second pass in the long
segments, and what follows for workflows (tell, release the stale, release the rest a chunk
a transaction, resume the failed parents' children and parked jobs).

Like ``flows``, a flow here yields steps and is sent their answers; it does no I/O, names no
statement and imports no dialect. The dialect (PostgreSQL's ``completion``) binds params,
runs statements, reads rows into the records below and answers the steps. Unlike
``flows.drive_async``, ``drive_async`` here throws a step's error into the flow, which
decides which errors it survives (a release that failed after the outcomes were written is
left to the sweep).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._job import Completion
from ..errors import BackendError
from .flows import Flow, R

log = logging.getLogger("skiplock")

SMALL_OUTCOME_BATCH = 4
"""Up to how many outcomes a batch is written by the statement that also releases the
children of those that succeeded (one round trip for a chain's link)."""


@dataclass(frozen=True, slots=True)
class WrittenJob:
    """One outcome a completion statement wrote (its job was still running under its lease)."""

    id: int
    parented: bool
    """Finished with open edges (the releasing statement, which released a succeeded job's
    own: and not succeeded); those not succeeded follow ``after_completion``."""
    succeeded: bool
    parked: bool


@dataclass(slots=True)
class Written:
    """What completion statements wrote: the jobs, whether they were looked for in given
    segments, and what is left to workflows: the queues the statement's own release woke,
    the children it left at zero for a newer snapshot, and the jobs whose children are
    (still) to release."""

    jobs: list[WrittenJob]
    segments_given: bool
    woken: set[str] = dataclasses.field(default_factory=set)
    stale: list[int] = dataclasses.field(default_factory=list)
    release_later: list[int] = dataclasses.field(default_factory=list)

    def add(self, more: Written) -> None:
        self.jobs += more.jobs
        self.woken |= more.woken
        self.stale += more.stale
        self.release_later += more.release_later


@dataclass(frozen=True, slots=True)
class Released:
    """The answer of ``WriteReleasing``: the jobs written, whether they were looked for in
    given segments, and its release: how many edges it resolved (a full chunk: there may be
    more), the queues it woke and the children it left at zero."""

    jobs: list[WrittenJob]
    segments_given: bool
    resolved: int
    woken: set[str]
    stale: list[int]


@dataclass(frozen=True, slots=True)
class Refused:
    """The answer of ``WriteReleasing`` when the database refused the statement (not a lost
    connection: a user's trigger, a limit); nothing of it was written."""

    reason: str


@dataclass(frozen=True, slots=True)
class WriteAlone:
    """-> list[WrittenJob], and whether they were looked for in given segments, as a
    ``Written``: the completion statement without a release. ``long_segments``: look for the
    rows in the long segments (else in those they were claimed from)."""

    completions: Sequence[Completion]
    long_segments: bool


@dataclass(frozen=True, slots=True)
class WriteReleasing:
    """-> Released, or Refused: the completion statement that also releases (a chunk of
    ``chunk`` edges of) the children of the jobs that succeeded."""

    completions: Sequence[Completion]
    long_segments: bool
    chunk: int


@dataclass(frozen=True, slots=True)
class Tell:
    """-> None: tell this process's workers of the queues a release woke."""

    woken: set[str]


@dataclass(frozen=True, slots=True)
class ReleaseChunk:
    """-> (edges resolved, queues woken, children buried): one transaction releasing at most
    ``chunk`` open edges of ``parents`` (succeeded), and the children it left at zero."""

    parents: list[int]
    chunk: int


@dataclass(frozen=True, slots=True)
class ChildrenReady:
    """-> (queues woken, children buried): the children a release left at zero, released
    (or buried) by a statement that sees every parent's result."""

    children: list[int]


@dataclass(frozen=True, slots=True)
class ReleaseBuried:
    """-> None: the children of jobs a release buried follow their policies (the workflow
    release, as a dead parent's do)."""

    parents: list[int]


@dataclass(frozen=True, slots=True)
class AfterCompletion:
    """-> None: resume, in a flow, the children of jobs that failed and parked jobs."""

    finished: list[int]
    parked: list[int]


def write_outcomes(
    completions: Sequence[Completion], *, can_release: bool, chunk: int
) -> Flow[Written]:
    """A batch of outcomes written (``follow`` follows them): first in the segments the
    jobs were claimed from (nearly always one), then what that missed in the long segments,
    where a rotation moves a job that ran past its segment's turn (the rest of the missed
    lost their lease: found nowhere). ``can_release``: the dialect has the session the
    releasing statement runs on."""
    written = yield from write(completions, False, can_release=can_release, chunk=chunk)
    if written.segments_given and len(written.jobs) < len(completions):
        found = {j.id for j in written.jobs}
        missed = [c for c in completions if c.job_id not in found]
        written.add((yield from write(missed, True, can_release=can_release, chunk=chunk)))
    return written


def write(
    completions: Sequence[Completion], long_segments: bool, *, can_release: bool, chunk: int
) -> Flow[Written]:
    """One completion statement. A few outcomes go to the statement that also releases the
    children of those that succeeded (one round trip for a chain's link); a batch to the
    statement alone, its releases after it. A refused release does not hold the outcomes
    back: they are written alone, the release tried after them (and by the sweep)."""
    if not can_release or len(completions) > SMALL_OUTCOME_BATCH:
        return (yield from write_alone(completions, long_segments))
    answer: Released | Refused = yield WriteReleasing(completions, long_segments, chunk)
    if isinstance(answer, Refused):
        log.warning(
            "a completion's own release failed (%s); writing the outcomes alone", answer.reason
        )
        return (yield from write_alone(completions, long_segments))
    full = answer.resolved >= chunk
    return Written(
        answer.jobs,
        answer.segments_given,
        woken=answer.woken,
        stale=answer.stale,
        release_later=[j.id for j in answer.jobs if j.succeeded] if full else [],
    )


def write_alone(completions: Sequence[Completion], long_segments: bool) -> Flow[Written]:
    """The completion statement without a release: the children of the jobs that succeeded
    are released after it (``release_later``)."""
    written: Written = yield WriteAlone(completions, long_segments)
    written.release_later = [j.id for j in written.jobs if j.parented and j.succeeded]
    return written


def follow(written: Written, chunk: int) -> Flow[None]:
    """What the completion statement left to workflows: tell this process's workers of the
    children it released; release the children it left at zero for a newer snapshot, and
    the rest (or all) of the children of jobs that succeeded (a chunk a transaction); resume
    the children of jobs that failed and parked jobs already signalled. A failure here
    leaves it to the sweep (the outcomes are written)."""
    yield from tell(written.woken)
    failed = [j.id for j in written.jobs if j.parented and not j.succeeded]
    parked = [j.id for j in written.jobs if j.parked]
    try:
        if written.stale:
            yield from release_stale(written.stale)
        if written.release_later:
            yield from release_succeeded(written.release_later, chunk)
        if failed or parked:
            yield AfterCompletion(failed, parked)
    except BackendError as exc:
        log.warning("workflow release after a completion failed (the sweep will): %s", exc)


def release_stale(children: list[int]) -> Flow[None]:
    """Children a release left at zero (their wait row was newer than its snapshot, or the
    list of their parents' results is over the bound): released (or buried) by a statement
    of their own; the children of those buried follow their policies."""
    woken: set[str]
    buried: list[int]
    woken, buried = yield ChildrenReady(children)
    yield from tell(woken)
    if buried:
        yield ReleaseBuried(buried)


def release_succeeded(parents: list[int], chunk: int) -> Flow[None]:
    """The children of ``parents`` (succeeded), ``chunk`` edges a transaction, until a chunk
    comes back short; then the children of those buried follow their policies."""
    buried: list[int] = []
    while True:
        resolved: int
        woken: set[str]
        more: list[int]
        resolved, woken, more = yield ReleaseChunk(parents, chunk)
        yield from tell(woken)
        buried += more
        if resolved < chunk:
            break
    if buried:
        yield ReleaseBuried(buried)


def tell(woken: set[str]) -> Flow[None]:
    if woken:
        yield Tell(woken)


async def drive_async(flow: Flow[R], answer: Callable[[Any], Awaitable[Any]]) -> R:
    """Run a flow with an asynchronous answerer; a step's error is thrown into the flow."""
    try:
        step = next(flow)
        while True:
            try:
                value = await answer(step)
            except Exception as exc:  # the flow decides: it catches it, or it ends the flow
                step = flow.throw(exc)
            else:
                step = flow.send(value)
    except StopIteration as done:
        result: R = done.value
        return result
