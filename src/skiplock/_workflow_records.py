"""What the workflow reads return: a job's links, a batch's counts, the waiting jobs, a graph,
and how a signal was taken. Plain records, the same from both backends."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime


class SignalOutcome(enum.StrEnum):
    """What ``app.signal(job_id, name, payload)`` did (``SignalReceipt.outcome``).

    A job's signals are a mailbox: each signal of a name is kept, in the order they came, and
    the n-th ``wait_for(name)`` of a run takes the n-th (a wait's timeout takes the place of
    the signal it waited for)."""

    DELIVERED = "delivered"
    """The job waits for this signal (parked on it, or about to be): it runs again now."""
    KEPT = "kept"
    """Kept for a later ``wait_for(name)``: the job does not wait for it now (it is running,
    pending, waiting for its parents, or parked on another signal: ``waiting_for``)."""
    FINISHED = "finished"
    """The job has finished: nothing waits for a signal any more, and it is not kept."""


@dataclass(frozen=True, slots=True)
class SignalReceipt:
    """What ``app.signal`` returns: what became of the signal, and what the job waits for."""

    job_id: int
    name: str
    outcome: SignalOutcome
    waiting_for: str | None = None
    """The signal the job is parked on (or about to park on) when this one came; None if it
    waits for none (running, pending, waiting for its parents, finished)."""

    @property
    def awaited(self) -> bool:
        """Whether the job was waiting for this very signal (``DELIVERED``)."""
        return self.outcome is SignalOutcome.DELIVERED

    @property
    def mistaken(self) -> bool:
        """Whether this looks like a person's mistake: the job has finished, or it is parked
        on a signal of another name (a typo, most likely). The CLI exits 1 on these."""
        if self.outcome is SignalOutcome.FINISHED:
            return True
        return self.outcome is SignalOutcome.KEPT and self.waiting_for is not None

    def describe(self) -> str:
        """One line for a person: ``kept, not awaited: job 75 waits for 'approved', not
        'aproved'``."""
        if self.outcome is SignalOutcome.DELIVERED:
            return "delivered"
        if self.outcome is SignalOutcome.FINISHED:
            return f"not kept: job {self.job_id} has finished"
        if self.waiting_for is not None:
            return (
                f"kept, not awaited: job {self.job_id} waits for {self.waiting_for!r}, "
                f"not {self.name!r}"
            )
        return (
            f"kept: job {self.job_id} waits for no signal now; its next "
            f"wait_for({self.name!r}) takes it"
        )


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
    aborted_at: datetime | None = None
    """When the block that filled it raised (its callbacks were cancelled then); None if not."""

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def finished(self) -> int:
        return sum(self.counts.get(s, 0) for s in ("succeeded", "cancelled", "dead", "gone"))

    @property
    def closed(self) -> bool:
        return self.closed_at is not None

    @property
    def aborted(self) -> bool:
        """Whether a block of the batch raised: no callback runs over its partial set."""
        return self.aborted_at is not None


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
