"""Workflow rows read the same for both dialects: signal receipts and mailbox entries, the
mailbox's refusal, a chord body buried for its size, links, batches, waiting jobs and the
graph.

Nothing here speaks SQL or touches a connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from .._workflow_records import (
    BatchInfo,
    GraphNode,
    JobLinks,
    LinkedJob,
    SignalOutcome,
    SignalReceipt,
    StoredSignal,
    WaitingJob,
    WorkflowGraph,
)
from ..errors import MailboxFull
from .job_rows import from_seconds

FINAL_STATES = frozenset({"succeeded", "cancelled", "dead"})


def signal_taken(job_id: int, name: str, seq: int, wait: Sequence[Any] | None) -> SignalReceipt:
    """The receipt of a signal stored as entry ``seq`` of its name, from the job's wait row
    (signal, entry; None: no row): delivered if the job waits for that entry or an earlier one
    of this name (it runs again now), else kept, naming what it does wait for."""
    waiting_for, entry = (wait[0], int(wait[1])) if wait is not None else (None, 1)
    if waiting_for == name and entry <= seq:
        return SignalReceipt(job_id, name, SignalOutcome.DELIVERED, name)
    return SignalReceipt(job_id, name, SignalOutcome.KEPT, waiting_for)


def mailbox_full(job_id: int, most: int) -> MailboxFull:
    """The refusal of a signal to a job whose mailbox holds ``most`` signals no wait took
    (both backends raise it, in these words)."""
    return MailboxFull(
        f"job {job_id}: its mailbox holds max_signals_kept={most} signals no wait_for took "
        "yet; this one was not kept (send it again once the job has taken some)",
        job_id=job_id,
        most=most,
    )


def stored_signal(kind: str, payload: str | None, sender: str | None, at: Any) -> StoredSignal:
    """A mailbox entry from a row (``at``: a datetime, or SQLite's Unix seconds; None on a
    SQLite row written without one)."""
    when = at if isinstance(at, datetime) or at is None else from_seconds(at)
    return StoredSignal(kind, payload, sender, when)


def gathered_too_large(parents: int, size: int, bound: int, now: float) -> str:
    """The error a chord's body buried for the size of its parents' results keeps (as JSON,
    the shape of ``error_record``; PostgreSQL's CHILDREN_READY writes the same words)."""
    return json.dumps(
        {
            "attempt": 0,
            "at": now,
            "message": f"the list of its {parents} parents' results is {size} bytes, over "
            f"max_payload_bytes ({bound}): it was not run",
            "type": "PayloadTooLarge",
            "traceback": None,
            "worker": None,
        }
    )


def _maybe_time(seconds: float | Decimal | None) -> datetime | None:
    return None if seconds is None else from_seconds(seconds)


def job_links(
    parents: Iterable[Sequence[Any]],
    children: Iterable[Sequence[Any]],
    wait: Sequence[Any] | None,
    batch: int | None,
    parent_counts: Iterable[Sequence[Any]] = (),
) -> JobLinks:
    return JobLinks(
        parents=linked_jobs(parents),
        children=linked_jobs(children),
        batch_id=batch,
        parents_left=None if wait is None else wait[0],
        signal=None if wait is None else wait[1],
        parent_counts={str(r[0]): int(r[1]) for r in parent_counts},
    )


def linked_jobs(rows: Iterable[Sequence[Any]]) -> list[LinkedJob]:
    """Rows (id, state, on_failure) of a job's parents or children."""
    return [LinkedJob(r[0], r[1], r[2]) for r in rows]


def batch_info(row: Sequence[Any]) -> BatchInfo:
    """A batch's counts: its member rows per state, and the members the retention pruned
    (their rows went with their jobs; the batch kept their number) as ``gone``."""
    counts = {str(k): int(v) for k, v in (json.loads(row[5]) if row[5] else {}).items()}
    if pruned := int(row[7] or 0):
        counts["gone"] = counts.get("gone", 0) + pruned
    return BatchInfo(
        id=row[0],
        created_at=from_seconds(row[1]),
        closed_at=_maybe_time(row[2]),
        on_success=row[3],
        on_complete=row[4],
        counts=counts,
        aborted_at=_maybe_time(row[6]),
    )


def waiting_job(row: Sequence[Any]) -> WaitingJob:
    signal = row[4]
    return WaitingJob(
        id=row[0],
        task=row[1],
        queue=row[2],
        parents_left=row[3],
        signal=signal,
        until=_maybe_time(row[5]) if signal is not None else None,
        created_at=from_seconds(row[6]),
    )


def workflow_graph(
    nodes: Iterable[Sequence[Any]], edges: Iterable[Sequence[Any]], truncated: bool
) -> WorkflowGraph:
    made = [GraphNode(r[0], r[1], r[2]) for r in nodes]
    known = {n.id for n in made}
    pairs = [(e[0], e[1]) for e in edges if e[0] in known and e[1] in known]
    return WorkflowGraph(sorted(made, key=lambda n: n.id), sorted(pairs), truncated)
