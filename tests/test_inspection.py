"""The reads the dashboard is built on, on SQLite and PostgreSQL: keyset pages, the count a
bulk action previews, dead letters grouped by task and error, each schedule's last run."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

import skiplock
from skiplock import JobFilter, JobState, Worker
from skiplock._worker.scheduler import Scheduler


async def burst(app: skiplock.App) -> None:
    worker = Worker(app, poll_interval_s=0.05, scheduler=False)
    await asyncio.wait_for(worker.run(burst=True), timeout=60)


async def test_keyset_pages_cover_every_job_once(app: skiplock.App) -> None:
    @app.task(name="k")
    async def k(n: int) -> None:
        pass

    ids = [h.id for h in await app.enqueue_many(k.prepare(i) for i in range(25))]
    seen: list[int] = []
    before: int | None = None
    while page := await app.list_jobs(where=JobFilter(limit=10), before_id=before):
        seen += [j.id for j in page]
        before = page[-1].id
    assert seen == sorted(ids, reverse=True)
    odd = await app.list_jobs(where=JobFilter(ids=tuple(ids[1::2]), limit=5), before_id=ids[-1])
    assert [j.id for j in odd] == sorted(ids[1::2], reverse=True)[:5]
    with pytest.raises(skiplock.ConfigurationError, match="before_id"):
        await app.list_jobs(before_id=0)


async def test_dead_letters_group_by_task_and_last_error(app: skiplock.App) -> None:
    @app.task(name="boom", max_attempts=1)
    async def boom(kind: str) -> None:
        raise ValueError(f"bad {kind}")

    await app.enqueue_many([boom.prepare("a"), boom.prepare("a"), boom.prepare("b")])
    await burst(app)
    groups = await app.dead_groups()
    assert [(g.task, g.error, g.count) for g in groups] == [
        ("boom", "ValueError: bad a", 2),
        ("boom", "ValueError: bad b", 1),
    ]
    assert groups[0].last_at is not None
    newest = max(j.id for j in await app.list_jobs(JobState.DEAD, JobFilter(error="bad a")))
    assert groups[0].last_id == newest
    preview = await app.count_jobs(JobState.DEAD, JobFilter(task="boom", error="bad a"))
    assert preview == 2
    requeued = await app.requeue_dead(JobFilter(task="boom", error="bad a"), who="ops")
    assert len(requeued) == preview
    assert await app.count_jobs(JobState.PENDING) == 2


async def test_last_run_of_each_schedule_names_its_job(app: skiplock.App) -> None:
    @app.task(name="tick")
    async def tick() -> None:
        pass

    app.schedule(tick, "* * * * *", name="every-minute")
    assert await app.cron_last_runs() == []
    scheduler = Scheduler(app.registry, await app.backend())
    await scheduler.tick(datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC))
    await scheduler.tick(datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC))
    [run] = await app.cron_last_runs()
    assert run.schedule == "every-minute"
    assert run.slot == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    assert run.job_id is not None
    assert (await app.get_job(run.job_id)).task == "tick"


async def test_prune_applies_a_retention_now(app: skiplock.App) -> None:
    @app.task(name="p")
    async def p() -> None:
        pass

    await app.enqueue_many([p.prepare() for _ in range(3)])
    await burst(app)
    assert await app.prune(finished_age_s=3600, dead_age_s=3600) == 0
    assert await app.prune(finished_age_s=0, dead_age_s=0, batch=2) == 3
    assert await app.count_jobs() == 0
    with pytest.raises(skiplock.ConfigurationError, match="dead_age_s"):
        await app.prune(finished_age_s=0, dead_age_s=-1)
