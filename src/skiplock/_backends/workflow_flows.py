"""Workflows' multi-statement operations, written once as step generators (``flows.py`` says
how a flow runs on both dialects).

- ``enqueue_plan``: a workflow's jobs, their edges and their waits, in the caller's
  transaction (all or none);
- ``release``: what parents that finished mean for their waiting children: each edge is
  resolved once (under its own row lock), each child's count of parents left goes down under
  its wait row's lock, and a child reaching zero becomes pending exactly once, whichever
  worker finished the last parent and however many finished it at the same instant;
- ``sweep``: the backstop every worker's rescuer runs: releases a crash or a commit race left
  undone, parked jobs whose signal is stored, and waits whose timeout passed
  (``workflow_sweep.py`` runs it item by item past a failing one);
- ``retry_unreleased``: a person's retry of a job that ended while it waited for its parents
  (it never got their results): it waits for them again, or is refused.

Nothing here runs a callback: a callback, a chord's body, a chain's next link is a job
written at enqueue in ``waiting``, and releasing it is one conditional row change. So it
fires once by construction, even when a worker dies between a member's completion and the
release (the sweep finds the finished parent's open edge).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .._job import NewJob
from .._workflow_records import WorkflowGraph
from ..errors import (
    BatchClosed,
    JobNotFound,
    ParentResultGone,
    PayloadTooLarge,
    UnknownParent,
    WorkflowCycle,
)
from .flows import Flow
from .workflow_plan import Node, Plan, SweepResult
from .workflow_rows import workflow_graph

ON_FAILURE = ("cancel", "run", "wait")
PASS_RESULTS = ("previous", "all", "batch")
SWEEP_MOST = 1000
"""Parents (and expired waits) one sweep handles; the next sweep takes the rest."""


# -- steps ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FindMissing:
    """-> the ids among ``ids`` that name no job."""

    ids: Sequence[int]


@dataclass(frozen=True, slots=True)
class InsertJobs:
    """-> the new jobs' ids, in order (the dialect's ordinary insert, this transaction), those
    whose ``waiting`` is true written as waiting rather than pending (PostgreSQL's COPY writes
    them so; a move between partitions afterwards cost 80 ms a fan-out of 10,000)."""

    jobs: Sequence[NewJob]
    waiting: Sequence[bool]


@dataclass(frozen=True, slots=True)
class InsertWaits:
    """Rows of (job id, parents left, pass_results, batch id). -> None"""

    rows: Sequence[tuple[int, int, str | None, int | None]]


@dataclass(frozen=True, slots=True)
class AddParents:
    """Rows of (waiting job id, more parents). -> None"""

    rows: Sequence[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class InsertEdges:
    """Rows of (child, parent, position, on_failure). -> None"""

    rows: Sequence[tuple[int, int, int, str]]


@dataclass(frozen=True, slots=True)
class LockBatch:
    """-> (closed, on_success id, on_complete id) of the batch, locked; None if unknown."""

    batch_id: int


@dataclass(frozen=True, slots=True)
class InsertBatch:
    """-> a new open batch's id."""


@dataclass(frozen=True, slots=True)
class SetCallbacks:
    """The batch's callback jobs. -> None"""

    batch_id: int
    on_success: int | None
    on_complete: int | None


@dataclass(frozen=True, slots=True)
class CloseBatch:
    """-> (on_success, on_complete) of the batch, now closed; None if it was closed already
    (or is unknown)."""

    batch_id: int


@dataclass(frozen=True, slots=True)
class AbortBatch:
    """-> (on_success, on_complete) of the batch, now closed as aborted; None if it was
    closed already (or is unknown)."""

    batch_id: int


@dataclass(frozen=True, slots=True)
class CancelMembers:
    """-> the batch's members that never started (pending or waiting, never attempted), now
    cancelled with ``error`` (an error record as JSON); their wait rows gone."""

    batch_id: int
    error: str


@dataclass(frozen=True, slots=True)
class AncestorsMeet:
    """-> whether any of ``targets`` is one of ``starts`` or an ancestor of one."""

    starts: Sequence[int]
    targets: Sequence[int]


@dataclass(frozen=True, slots=True)
class InsertMembers:
    """The jobs join the batch's member list. -> None"""

    batch_id: int
    ids: Sequence[int]


@dataclass(frozen=True, slots=True)
class ResolveEdges:
    """-> rows (child, parent, parent_state, on_failure) of the open edges of ``parents``
    this step resolved (finished or gone parents only; 'wait' edges of failed ones stay)."""

    parents: Sequence[int]


@dataclass(frozen=True, slots=True)
class Decrement:
    """-> the children (of ``counts``: child -> resolved parents) now at zero parents."""

    counts: dict[int, int]


@dataclass(frozen=True, slots=True)
class CancelChildren:
    """-> the waiting children cancelled (``errors``: child -> its error record as JSON)."""

    errors: dict[int, str]


@dataclass(frozen=True, slots=True)
class Ready:
    """-> (released, buried): the waiting children with no parent left now pending (their
    queues woken), and those buried instead, ``dead`` with a PayloadTooLarge error, because
    the list of their parents' results (``pass_results='all'``) would be over the payload
    bound the answerer holds (its backend's ``max_payload_bytes``; summed first: the list is
    never built)."""

    ids: Sequence[int]


@dataclass(frozen=True, slots=True)
class EdgesAround:
    """-> (parent, child) pairs of every edge that touches one of ``ids``."""

    ids: Sequence[int]


@dataclass(frozen=True, slots=True)
class GraphNodes:
    """-> (id, task, state) of the jobs ``ids`` that exist."""

    ids: Sequence[int]


@dataclass(frozen=True, slots=True)
class OpenParents:
    """-> up to ``most`` parents with an open edge that are finished or gone."""

    most: int


@dataclass(frozen=True, slots=True)
class StrandedWaits:
    """-> up to ``most`` waiting children whose count of parents is at zero (a release left
    one so for a statement with a newer snapshot, and died before it ran)."""

    most: int


@dataclass(frozen=True, slots=True)
class ExpireWaits:
    """-> the parked jobs whose timeout passed, now pending (the timeout recorded)."""

    most: int


@dataclass(frozen=True, slots=True)
class SignalledParked:
    """-> up to ``most`` parked jobs whose signal is stored, now pending (the sweep's look)."""

    most: int


@dataclass(frozen=True, slots=True)
class ResumeSignalled:
    """-> the parked jobs among ``ids`` whose signal is already stored, now pending."""

    ids: Sequence[int]


@dataclass(frozen=True, slots=True)
class TakeUnreleased:
    """-> (pass_results, batch_id) kept for ``job_id`` when it ended while it waited for its
    parents (it is cancelled or dead, its row locked, the kept row taken); None otherwise."""

    job_id: int


@dataclass(frozen=True, slots=True)
class ChildEdges:
    """-> rows (parent, edge's parent_state, on_failure, the parent's state now or 'gone') of
    every edge into ``child``, locked (a release of one of them waits for this transaction)."""

    child: int


@dataclass(frozen=True, slots=True)
class ReopenEdges:
    """The edges from ``parents`` into ``child`` are open again (their resolution undone).
    -> None"""

    child: int
    parents: Sequence[int]


@dataclass(frozen=True, slots=True)
class Rewait:
    """The finished job waits again: ``waiting`` with attempts reset, the retry in its audit
    (``who``), its wait row (re)written with ``parents_left``. -> None"""

    job_id: int
    parents_left: int
    pass_results: str | None
    batch_id: int | None
    who: str


@dataclass(frozen=True, slots=True)
class StateOf:
    """-> (state, its last error's message or None) of the job."""

    job_id: int


# -- flows ---------------------------------------------------------------------------------


def enqueue_plan(plan: Plan) -> Flow[list[int]]:
    """Write a plan's jobs, waits and edges; release those whose parents already finished."""
    olds = sorted({-1 - p for n in plan.nodes for p in n.parents if p < 0})
    if olds:
        missing: Sequence[int] = yield FindMissing(olds)
        if missing:
            names = ", ".join(str(i) for i in sorted(missing)[:10])
            raise UnknownParent(
                f"depends_on: no job {names} (never written, or pruned or discarded since); "
                "a parent must exist when its child is enqueued"
            )
    batch = None if plan.batch_id is None else (yield from _open_batch(plan.batch_id, olds))
    callbacks = () if batch is None else tuple(c for c in batch[1:] if c is not None)
    waits_on = [bool(n.parents or n.gate) for n in plan.nodes]
    ids: list[int] = yield InsertJobs([n.job for n in plan.nodes], waits_on)
    waits: list[tuple[int, int, str | None, int | None]] = []
    edges: list[tuple[int, int, int, str]] = []
    for node, child in zip(plan.nodes, ids, strict=True):
        if not node.parents and not node.gate:
            continue
        parents = [ids[p] if p >= 0 else -1 - p for p in node.parents]
        unique = list(dict.fromkeys(parents))
        batch_id = plan.batch_id if plan.batch_id is not None else plan.callbacks_of
        waits.append((child, len(unique) + node.gate, node.pass_results, batch_id))
        edges += [(child, p, i, node.on_parent_failure) for i, p in enumerate(unique)]
    if waits:
        yield InsertWaits(waits)
    if plan.batch_id is not None and batch is not None and callbacks:
        yield InsertMembers(plan.batch_id, ids)
        for callback, policy in zip(callbacks, _callback_policies(batch), strict=True):
            edges += [(callback, member, 0, policy) for member in ids]
        yield AddParents([(c, len(ids)) for c in callbacks])
    if edges:
        yield InsertEdges(edges)
    if olds:
        yield from release(olds)
    return ids


def _open_batch(batch_id: int, olds: Sequence[int]) -> Flow[tuple[bool, int | None, int | None]]:
    """The batch a plan joins, locked: refused if unknown or closed, or if a member would
    wait (through ``olds``) for the batch's own callbacks."""
    batch: tuple[bool, int | None, int | None] | None = yield LockBatch(batch_id)
    if batch is None:
        raise JobNotFound(f"batch {batch_id}: no such batch")
    closed, on_success, on_complete = batch
    if closed:
        raise BatchClosed(f"batch {batch_id} is closed: no job may join it now")
    callbacks = [c for c in (on_success, on_complete) if c is not None]
    if olds and callbacks and (yield AncestorsMeet(olds, callbacks)):
        raise WorkflowCycle(
            f"depends_on: a job of batch {batch_id} cannot wait for the batch's own "
            "callback (or a job that waits for it): that is a cycle"
        )
    return batch


def _callback_policies(batch: tuple[bool, int | None, int | None]) -> list[str]:
    """on_success waits for every member to succeed (a failure cancels it); on_complete runs
    once every member finished, however."""
    _closed, on_success, on_complete = batch
    policies = []
    if on_success is not None:
        policies.append("cancel")
    if on_complete is not None:
        policies.append("run")
    return policies


def _cancels(state: str, policy: str) -> bool:
    """Whether a parent that ended in ``state`` cancels a child of ``policy``: a failed one a
    'cancel' child; a gone one (pruned) a 'wait' child too, as no retry of it can come."""
    if state == "succeeded":
        return False
    return policy == "cancel" or (policy == "wait" and state == "gone")


def _failure_record(parent: int, state: str, policy: str, now: datetime) -> str:
    """The error a child cancelled for its parent keeps (the shape of ``error_record``)."""
    ended = "is gone (pruned or discarded)" if state == "gone" else f"ended {state}"
    why = f"on_parent_failure={policy!r}"
    if policy == "wait":
        why += " waited for its retry, which can no longer come"
    return json.dumps(
        {
            "attempt": 0,
            "at": now.isoformat(),
            "message": f"parent job {parent} {ended}; {why}",
            "type": "ParentFailed",
            "traceback": None,
            "worker": None,
        }
    )


def release(parents: Sequence[int]) -> Flow[list[int]]:
    """Resolve finished parents' edges; cancel or release their children (and theirs, for a
    cancel or a burial, down the graph). Returns the children released to pending."""
    frontier = list(parents)
    released: list[int] = []
    while frontier:
        rows: Sequence[tuple[int, int, str, str]] = yield ResolveEdges(frontier)
        if not rows:
            break
        counts = Counter(child for child, _parent, _state, _policy in rows)
        now = datetime.now(UTC)
        failed: dict[int, str] = {}
        for child, parent, state, policy in rows:
            if _cancels(state, policy) and child not in failed:
                failed[child] = _failure_record(parent, state, policy, now)
        zero: list[int] = yield Decrement(dict(counts))
        frontier = list((yield CancelChildren(failed))) if failed else []
        unfailed = [c for c in zero if c not in failed]
        if unfailed:
            made, buried = yield Ready(unfailed)
            released += made
            frontier += buried
    return released


def ready(ids: Sequence[int]) -> Flow[list[int]]:
    """Release the waiting children ``ids`` at zero parents; the children of those buried
    instead (``Ready``) follow their policies. Returns the children released."""
    made, buried = yield Ready(ids)
    made = list(made)
    if buried:
        made += yield from release(buried)
    return made


LIVE = ("pending", "running", "waiting")


def _edges_to_wait_on(
    job_id: int, edges: Sequence[tuple[int, str | None, str, str]]
) -> tuple[list[int], list[int]]:
    """For a retry of ``job_id`` with these edges (parent, resolved as, policy, parent's
    state now): the parents whose resolved edges open again (failed then, retried since),
    and the finished parents whose open edges are to be resolved now. Raises
    ParentResultGone for a parent that ended without the result the job needs."""
    reopen: list[int] = []
    settle: list[int] = []
    for parent, resolved, policy, now in edges:
        if resolved == "succeeded":
            continue
        if now in LIVE or now == "succeeded":
            if resolved is not None:
                reopen.append(parent)
            if now == "succeeded":
                settle.append(parent)
        elif policy == "run" or (policy == "wait" and now != "gone"):
            if resolved is None and policy == "run":
                settle.append(parent)
        else:
            ended = "is gone (pruned or discarded)" if now == "gone" else f"ended {now}"
            raise ParentResultGone(
                f"job {job_id} was not retried: it never got the result of its parent job "
                f"{parent}, which {ended}; retry job {parent} first (job {job_id} then waits "
                "for it), or enqueue the work again"
            )
    return reopen, settle


def retry_unreleased(job_id: int, who: str) -> Flow[bool]:
    """A person's retry of a job that ended while it waited for its parents, so never got
    their results: it waits for them again (a parent that will still run, or that succeeded
    since, counts; a failed one retried since is waited for again) and is released with them
    as if it had never ended; refused (ParentResultGone, nothing changed) where a parent it
    needs ended without a result. False: the job is no such job (the caller's ordinary retry,
    which leaves these alone, requeues it as it is)."""
    kept: tuple[str | None, int | None] | None = yield TakeUnreleased(job_id)
    if kept is None:
        return False
    pass_results, batch_id = kept
    edges: Sequence[tuple[int, str | None, str, str]] = yield ChildEdges(job_id)
    reopen, settle = _edges_to_wait_on(job_id, edges)
    if reopen:
        yield ReopenEdges(job_id, reopen)
    left = sum(1 for p, resolved, _policy, _now in edges if resolved is None or p in reopen)
    if pass_results == "batch" and batch_id is not None:
        batch = yield LockBatch(batch_id)
        left += 0 if batch is None or batch[0] else 1  # the open batch's gate
    yield Rewait(job_id, left, pass_results, batch_id, who)
    if settle:
        yield from release(settle)
    elif left == 0:
        yield from ready([job_id])
    state, error = yield StateOf(job_id)
    if state == "dead":  # buried again: the list of its parents' results is over the bound
        raise PayloadTooLarge(f"job {job_id} was not retried: {error}")
    return True


def open_batch(on_success: NewJob | None, on_complete: NewJob | None) -> Flow[int]:
    """A new open batch and its callbacks, each waiting on the batch's open gate."""
    batch_id: int = yield InsertBatch()
    jobs = [j for j in (on_success, on_complete) if j is not None]
    nodes = tuple(Node(job, pass_results="batch", gate=1) for job in jobs)
    ids = iter((yield from enqueue_plan(Plan(nodes, callbacks_of=batch_id))))
    success = next(ids) if on_success is not None else None
    complete = next(ids) if on_complete is not None else None
    yield SetCallbacks(batch_id, success, complete)
    return batch_id


def close_batch(batch_id: int) -> Flow[bool]:
    """Close the batch: its callbacks stop waiting on the gate (and run, if every member has
    finished already). False if it was closed already."""
    row = yield CloseBatch(batch_id)
    if row is None:
        return False
    callbacks = [c for c in row if c is not None]
    if callbacks:
        zero: list[int] = yield Decrement({c: 1 for c in callbacks})
        if zero:
            yield from ready(zero)
    return True


def abort_batch(batch_id: int, error: str) -> Flow[bool]:
    """A batch whose block raised: closed as aborted, its callbacks cancelled (``on_success``
    never runs over a partial set, nor ``on_complete``), and its members that never started
    cancelled, their own children following their policies; a member that started runs to its
    end. False if the batch was closed already (nothing changes)."""
    row = yield AbortBatch(batch_id)
    if row is None:
        return False
    callbacks = [c for c in row if c is not None]
    if callbacks:
        yield CancelChildren(dict.fromkeys(callbacks, error))
    cancelled: list[int] = yield CancelMembers(batch_id, error)
    if cancelled:
        yield from release(cancelled)
    return True


def after_completion(finished: Sequence[int], parked: Sequence[int]) -> Flow[list[int]]:
    """What a batch of outcomes means for workflows: the finished jobs' children, and parked
    jobs whose signal came before they parked. Returns the jobs made pending."""
    made: list[int] = []
    if finished:
        made += yield from release(finished)
    if parked:
        made += yield ResumeSignalled(parked)
    return made


def sweep_look(most: int = SWEEP_MOST) -> Flow[tuple[list[int], list[int]]]:
    """The sweep's two looks alone (``workflow_sweep.py`` then takes each item on its own):
    the finished parents with an open edge, and the children left at zero."""
    parents: Sequence[int] = yield OpenParents(most)
    stranded: Sequence[int] = yield StrandedWaits(most)
    return list(parents), list(stranded)


def signalled(most: int = SWEEP_MOST) -> Flow[list[int]]:
    """Parked jobs whose signal is stored run again (the look after their park was lost)."""
    made: list[int] = yield SignalledParked(most)
    return made


def expire(most: int = SWEEP_MOST) -> Flow[list[int]]:
    """The waits past their timeout end (their jobs run again, to raise SignalTimeout)."""
    timed_out: list[int] = yield ExpireWaits(most)
    return timed_out


def sweep(most: int = SWEEP_MOST) -> Flow[SweepResult]:
    """The backstop: releases left undone (or half done), parked jobs whose signal came
    while they ran towards their park (the look after that completion failed), waits past
    their timeout."""
    result = SweepResult()
    parents: Sequence[int] = yield OpenParents(most)
    if parents:
        result.released = yield from release(parents)
    stranded: Sequence[int] = yield StrandedWaits(most)
    if stranded:
        result.released += yield from ready(stranded)
    result.released += yield from signalled(most)
    result.timed_out = yield ExpireWaits(most)
    return result


def expire_waits(most: int = SWEEP_MOST) -> Flow[list[int]]:
    """Parked waits past their timeout run again (a worker's wait timer, when one comes due;
    the sweep does the same as a backstop). Returns the jobs made pending."""
    expired: list[int] = yield ExpireWaits(most)
    return expired


def graph(job_id: int, most: int) -> Flow[WorkflowGraph]:
    """The workflow around ``job_id``: a walk outward along edges, both ways, a ring of
    neighbours a step, so the ``most`` jobs kept are the nearest (the job itself first)."""
    order = [job_id]
    seen = {job_id}
    edges: set[tuple[int, int]] = set()
    frontier = [job_id]
    while frontier and len(order) <= most:  # one ring past ``most`` says if more are linked
        around: Sequence[tuple[int, int]] = yield EdgesAround(frontier)
        frontier = []
        for parent, child in around:
            edges.add((parent, child))
            for linked in (parent, child):
                if linked not in seen:
                    seen.add(linked)
                    order.append(linked)
                    frontier.append(linked)
    kept = order[:most]
    truncated = len(order) > most
    nodes: Sequence[tuple[int, str, str]] = yield GraphNodes(kept)
    return workflow_graph(nodes, sorted(edges), truncated)
