"""What the workflow reads return: a job's links, a batch's counts, the waiting jobs, a graph,
and how a signal was taken. Plain records, the same from both backends."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime


class SignalOutcome(enum.StrEnum):
    """What ``app.signal(job_id, name, payload)`` did."""

    DELIVERED = "delivered"
    """Stored; the job, parked on this name, runs again now (or finds it when it waits)."""
    DUPLICATE = "duplicate"
    """A signal of this name was already delivered: this one changed nothing."""
    TIMED_OUT = "timed_out"
    """The job's wait for this name timed out first: this signal changed nothing."""
    FINISHED = "finished"
    """The job has finished: nothing waits for a signal any more."""


@dataclass(frozen=True, slots=True)
class LinkedJob:
    """A parent or a child of a job: its id, state, and the child's ``on_parent_failure``."""

    id: int
    state: str
    """A job state, or ``gone`` (pruned or discarded)."""
    on_parent_failure: str


@dataclass(frozen=True, slots=True)
class JobLinks:
    """Where a job stands in a workflow."""

    parents: list[LinkedJob] = field(default_factory=list)
    """Its parents in order (the first ``parents_limit`` of ``app.job_links``)."""
    children: list[LinkedJob] = field(default_factory=list)
    """Its children by id (the first ``children_limit``)."""
    batch_id: int | None = None
    """The batch it belongs to (as a member or as a callback)."""
    parents_left: int | None = None
    """While it waits: how many parents (and an open batch's gate) it still waits for."""
    signal: str | None = None
    """While it is parked: the signal it waits for."""
    parent_counts: dict[str, int] = field(default_factory=dict)
    """Every parent counted by its state (``gone``: pruned or discarded), however many the
    list holds."""

    @property
    def parents_total(self) -> int:
        """How many parents it has (the list may hold only the first of them)."""
        return sum(self.parent_counts.values()) or len(self.parents)

    @property
    def empty(self) -> bool:
        """Whether the job takes part in no workflow."""
        return not (self.parents or self.children or self.batch_id or self.signal)


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """A batch's live counts: its members per state."""

    id: int
    created_at: datetime
    closed_at: datetime | None
    on_success: int | None
    """The job id of the ``on_success`` callback (None: none)."""
    on_complete: int | None
    counts: dict[str, int]
    """Members per state (``gone``: pruned or discarded)."""

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def finished(self) -> int:
        return sum(self.counts.get(s, 0) for s in ("succeeded", "cancelled", "dead", "gone"))

    @property
    def closed(self) -> bool:
        return self.closed_at is not None


@dataclass(frozen=True, slots=True)
class WaitingJob:
    """A job in ``waiting``: on parents, or parked on a signal until ``until``."""

    id: int
    task: str
    queue: str
    parents_left: int | None
    signal: str | None
    until: datetime | None
    """A parked job's wait ends (times out) then; None for one that waits on parents."""
    created_at: datetime


@dataclass(frozen=True, slots=True)
class GraphNode:
    id: int
    task: str
    state: str


@dataclass(frozen=True, slots=True)
class WorkflowGraph:
    """The jobs linked to one job, up and down, and the edges between them."""

    nodes: list[GraphNode]
    edges: list[tuple[int, int]]
    """(parent, child) pairs."""
    truncated: bool = False
    """More jobs are linked than the read returned."""
