"""A workflow's plan and a sweep's result: the values the backends and the layers above pass
(``workflow_flows.py`` writes and releases them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .._job import NewJob


@dataclass(frozen=True, slots=True)
class Node:
    """One job of a plan: its row, and what it waits for."""

    job: NewJob
    parents: tuple[int, ...] = ()
    """Its parents in order: an index into the plan's nodes (a job of this enqueue), or
    ``-1 - id`` for a job already written (see ``existing``)."""
    pass_results: str | None = None
    """``previous``: the one parent's result becomes the first positional argument;
    ``all``: the list of the parents' results, in order; ``batch``: the batch's id."""
    on_parent_failure: str = "cancel"
    gate: int = 0
    """Extra parents that are not jobs (a batch's open gate: 1 until the batch closes)."""


def existing(job_id: int) -> int:
    """A parent reference naming a job already written."""
    return -1 - job_id


@dataclass(frozen=True, slots=True)
class Plan:
    """The jobs of one workflow enqueue, in an order where every parent comes first."""

    nodes: tuple[Node, ...]
    batch_id: int | None = None
    """Every node joins this open batch (its callbacks wait for them too)."""
    callbacks_of: int | None = None
    """The nodes are this batch's callbacks (their first argument is its id)."""
    batch_database: str = "default"
    """The database ``batch_id`` lives in (an App of several databases: its members must go
    there too)."""


@dataclass(slots=True)
class SweepResult:
    """What one sweep did."""

    released: list[int] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)
