"""``Schedule``: a task, a cron expression and what to do about slots nobody was awake for.

Declared in code with ``@app.periodic(...)`` (stacked on ``@app.task``) or
``app.schedule(task, cron, ...)``; validated entirely at declaration.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from ._config import require
from ._cron import CronExpression, zone
from ._job import NewJob
from ._limits import check_text
from ._task import Task

MissedPolicy = Literal["skip", "latest", "all"]
MISSED_POLICIES: tuple[str, ...] = ("skip", "latest", "all")
DEFAULT_MAX_DELAY_S = 600.0
"""``latest`` catches up the most recent missed slot only if it is at most 10 minutes old."""
DEFAULT_MAX_CATCHUP = 100
"""``all`` replays at most the 100 most recent missed slots."""
SLOT_PARAMETERS = ("timestamp", "scheduled_at")
MAX_LOOKBACK = timedelta(days=7)


@dataclass(frozen=True)
class Schedule:
    """One periodic schedule. ``id`` names it in the database (the slot table's key)."""

    id: str
    task: Task[Any, Any]
    cron: CronExpression
    tz: ZoneInfo
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    missed: MissedPolicy = "latest"
    max_delay: float = DEFAULT_MAX_DELAY_S
    max_catchup: int = DEFAULT_MAX_CATCHUP
    queue: str | None = None
    priority: int | None = None
    overlap: bool = True
    """False: skip a slot while the previous run of this schedule is pending or running."""

    def __post_init__(self) -> None:
        check_text("name", self.id)  # the slot table's key: bounded like every label
        require(self.missed in MISSED_POLICIES, "missed", self.missed, f"one of {MISSED_POLICIES}")
        require(self.max_delay >= 0, "max_delay", self.max_delay, "must be >= 0 seconds")
        require(self.max_catchup >= 1, "max_catchup", self.max_catchup, "must be >= 1")
        self.job_for(datetime(2000, 1, 1, tzinfo=UTC))  # arguments must encode now, not later

    def slot_parameters(self) -> tuple[str, ...]:
        """Which of ``timestamp`` / ``scheduled_at`` the task's signature asks for; a task
        taking ``**kwargs`` (and neither by name) gets ``timestamp``."""
        try:
            parameters = inspect.signature(self.task.fn).parameters
        except (TypeError, ValueError):
            return ()
        named = tuple(name for name in SLOT_PARAMETERS if name in parameters)
        if named:
            return named
        kinds = {p.kind for p in parameters.values()}
        return ("timestamp",) if inspect.Parameter.VAR_KEYWORD in kinds else ()

    def job_for(self, slot: datetime) -> NewJob:
        """The job one slot enqueues: the fixed arguments, plus the slot if asked for."""
        kwargs = dict(self.kwargs)
        asked = self.slot_parameters()
        if "timestamp" in asked:
            kwargs["timestamp"] = int(slot.timestamp())
        if "scheduled_at" in asked:
            kwargs["scheduled_at"] = slot.astimezone(UTC).isoformat()
        task = self.task.using(queue=self.queue, priority=self.priority)
        return task.prepare(*self.args, **kwargs)

    def next_fires(self, after: datetime, count: int) -> list[datetime]:
        return list(itertools.islice(self.cron.next_fires(after, self.tz), count))

    def due_slots(self, after: datetime, now: datetime) -> list[datetime]:
        """Slots in ``(after, now]``, the most recent ``max_catchup`` of them at most.

        Nothing older than ``MAX_LOOKBACK`` (7 days, the slot rows' retention) is considered.
        """
        due: list[datetime] = []
        for slot in self.cron.next_fires(max(after, now - MAX_LOOKBACK), self.tz):
            if slot > now:
                break
            due.append(slot)
            if len(due) > self.max_catchup:
                del due[0]
        return due

    def missed_to_enqueue(self, missed: Sequence[datetime], now: datetime) -> list[datetime]:
        """Of the slots that passed while no scheduler of ours was running, which to run."""
        if not missed or self.missed == "skip":
            return []
        if self.missed == "latest":
            latest = missed[-1]
            return [latest] if (now - latest).total_seconds() <= self.max_delay else []
        return list(missed[-self.max_catchup :])


def build_schedule(
    task: Task[Any, Any],
    cron: str,
    *,
    name: str | None,
    tz: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    missed: MissedPolicy,
    max_delay: float,
    max_catchup: int,
    queue: str | None,
    priority: int | None,
    overlap: bool,
) -> Schedule:
    return Schedule(
        id=name or task.name,
        task=task,
        cron=CronExpression(cron),
        tz=zone(tz),
        args=tuple(args),
        kwargs=dict(kwargs or {}),
        missed=missed,
        max_delay=max_delay,
        max_catchup=max_catchup,
        queue=queue,
        priority=priority,
        overlap=overlap,
    )
