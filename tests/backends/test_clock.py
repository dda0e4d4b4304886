"""The database clock decides every instant, never the worker's.

The injected clock stands in for the database's now(); pinning it a day behind this
machine's clock is a worker whose wall clock is a day ahead of the database. A pause's end
and a pruning cut-off must follow the database, or skewed workers disagree about them.
"""

from __future__ import annotations

import pytest

import skiplock
from skiplock._backends.params import AuditPruneParams, JobInsertManyParams
from skiplock._config import WorkerConfig
from skiplock._job import Completion, Disposition, JobState
from skiplock._worker.services import Pruner
from skiplock.errors import JobNotFound

from ..helpers import FakeClock
from .helpers import claim, new_job

DAY = 86400.0


async def test_a_timed_task_pause_ends_by_the_database_clock(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    @clocked_app.task(name="t")
    async def t() -> None: ...

    clock.advance(-DAY)
    await clocked_app.pause_task("t", for_s=60)
    (pause,) = await clocked_app.task_pauses()
    assert pause.until is not None
    assert abs((pause.until - clock.now).total_seconds() - 60) < 1
    clock.advance(61)
    assert await clocked_app.task_pauses() == []


async def finish_one(clocked_app: skiplock.App) -> int:
    backend = await clocked_app.backend()
    (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job()]))
    (c,) = await backend.job_get_available(claim(limit=1, token=f"t{job_id}"))
    await backend.job_set_state_if_running_many(
        [Completion(c.id, c.lease_token, Disposition.SUCCEED)]
    )
    return job_id


async def test_pruning_measures_retention_by_the_database_clock(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    clock.advance(-DAY)
    old = await finish_one(clocked_app)
    clock.advance(7200)
    recent = await finish_one(clocked_app)
    backend = await clocked_app.backend()
    config = WorkerConfig(retention_finished_s=3600)
    assert await Pruner(backend, config).prune_once() == 1  # one pass, the old row only
    with pytest.raises(JobNotFound):
        await backend.job_get(old)
    assert (await backend.job_get(recent)).state is JobState.SUCCEEDED


async def test_a_pause_for_no_time_is_refused(clocked_app: skiplock.App) -> None:
    @clocked_app.task(name="t")
    async def t() -> None: ...

    for bad in (0.0, -5.0, float("inf")):
        with pytest.raises(skiplock.ConfigurationError, match="for_s"):
            await clocked_app.pause_task("t", for_s=bad)


async def test_the_audit_trail_is_pruned_past_its_retention_by_the_database_clock(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    """Nothing pruned the audit trail, so anyone who could make an action be refused filled
    it for ever; entries now go after ``retention_audit_s`` (90 days), oldest first."""
    clock.advance(-91 * DAY)
    for n in range(5):
        await clocked_app.record_action("refused pause queue", who="mallory", target=f"q{n}")
    clock.advance(91 * DAY - 3600)
    await clocked_app.record_action("pause queue", who="otto", target="queue q")
    backend = await clocked_app.backend()
    assert await clocked_app.prune_audit_preview(age_s=90 * DAY) == 5
    config = WorkerConfig(retention_audit_s=90 * DAY)
    assert await Pruner(backend, config).prune_audit_once() == 5
    assert [e.who for e in await clocked_app.audit_trail()] == ["otto"]
    clock.advance(3600)
    assert await clocked_app.prune_audit(age_s=1800) == 1  # by hand: recorded itself
    [entry] = await clocked_app.audit_trail()
    assert (entry.what, entry.target) == ("prune audit trail", "audit trail")
    assert entry.detail.startswith("1 rows;")
    with pytest.raises(skiplock.ConfigurationError, match="age_s"):
        await clocked_app.prune_audit(age_s=float("nan"))


async def test_audit_pruning_takes_a_bounded_batch_however_long_the_trail(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    clock.advance(-DAY)
    for n in range(7):
        await clocked_app.record_action("refused retry", who="mallory", target=f"job {n}")
    clock.advance(DAY)
    backend = await clocked_app.backend()
    assert await backend.audit_prune(AuditPruneParams(3600, 3)) == 3
    assert await backend.audit_prune(AuditPruneParams(3600, 3)) == 3
    assert await backend.audit_prune(AuditPruneParams(3600, 3)) == 1
    assert await backend.audit_prune(AuditPruneParams(3600, 3)) == 0
