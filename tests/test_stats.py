"""The health numbers on a crafted history under a pinned clock, on both backends: each number
is the hand count written beside it. Then the live-worker registry."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

import skiplock
from skiplock._backends import Backend
from skiplock._backends.params import (
    ClaimParams,
    JobActionParams,
    JobHeartbeatManyParams,
    JobInsertManyParams,
    WorkerBeatParams,
)
from skiplock._job import ClaimedJob, Completion, Disposition, NewJob
from skiplock.errors import ConfigurationError

from .helpers import FakeClock


def job(queue: str, task: str, **more: object) -> NewJob:
    return NewJob(task, queue, "[]", "{}", 0, int(more.pop("max_attempts", 3)), **more)  # type: ignore[arg-type]


def claim(limit: int, queues: tuple[str, ...] | None = None) -> ClaimParams:
    return ClaimParams(queues, limit, "w1", f"tok{limit}{queues}", 60.0, 5.0)


class History:
    """A pinned clock a day ahead of this machine's (so PostgreSQL's own created_at, which
    takes the real now(), is never later than a pinned run_at) and its app's backend."""

    def __init__(self, app: skiplock.App, clock: FakeClock, backend: Backend) -> None:
        self.app, self.clock, self.backend = app, clock, backend
        self.t0 = clock.now

    def at(self, offset_s: float) -> None:
        self.clock.now = self.t0 + timedelta(seconds=offset_s)

    async def insert(self, *jobs: NewJob) -> list[int]:
        return await self.backend.job_insert_many(JobInsertManyParams(jobs))

    async def claim(self, limit: int, queues: tuple[str, ...] | None = None) -> list[ClaimedJob]:
        return await self.backend.job_get_available(claim(limit, queues))

    async def finish(self, c: ClaimedJob, how: Disposition, run_s: float, delay: float = 0) -> None:
        done = Completion(c.id, c.lease_token, how, delay, run_s=run_s)
        assert await self.backend.job_set_state_if_running_many([done]) == [c.id]


@pytest.fixture
async def history(db_url: str) -> AsyncIterator[History]:
    clock = FakeClock(datetime.now(UTC).replace(microsecond=0) + timedelta(days=1))
    app = skiplock.App(db_url, clock=clock)
    await app.migrate()
    yield History(app, clock, await app.backend())
    await app.close()


async def craft(h: History) -> None:
    """Queues a (tasks x, y) and b (task z); T0 = h.t0, the reading at T0+200, window 300 s."""
    h.at(-1000)  # finished long before the window: counts in nothing
    await h.insert(job("a", "x"))
    (old,) = await h.claim(1)
    await h.finish(old, Disposition.SUCCEED, 99.0)
    h.at(0)
    j1, j2, j3, j4 = await h.insert(
        job("a", "x"), job("a", "x"), job("a", "y", max_attempts=1), job("b", "z", lease_s=30)
    )
    await h.insert(job("b", "z", run_after_s=10_000))  # J5: scheduled far ahead
    (j9,) = await h.insert(job("b", "z"))
    assert await h.backend.job_cancel(JobActionParams(j9)) is not None  # J9: never ran
    h.at(10)
    c1, c2, c3, c4 = sorted(await h.claim(10), key=lambda c: c.id)  # each 10 s after ready
    assert [c.id for c in (c1, c2, c3, c4)] == [j1, j2, j3, j4]
    h.at(20)
    await h.finish(c1, Disposition.SUCCEED, 3.0)
    await h.finish(c2, Disposition.RETRY, 0.5, delay=5)  # ready again at T0+25
    h.at(30)
    await h.finish(c3, Disposition.DEAD, 2.0)
    h.at(40)
    (c2b,) = await h.claim(10, ("a",))  # J2 again, 15 s after it was ready
    assert c2b.id == j2
    h.at(50)
    await h.finish(c2b, Disposition.SUCCEED, 1.0)
    h.at(100)
    assert await h.backend.job_reclaim_expired() == [j4]  # its 30 s lease ended at T0+40
    h.at(150)
    await h.insert(job("a", "x"))  # J6
    h.at(160)
    await h.insert(job("a", "y"))  # J7
    h.at(190)
    c6, c7 = sorted(await h.claim(2, ("a",)), key=lambda c: c.id)  # 40 s and 30 s after ready
    beat = JobHeartbeatManyParams(
        [(c6.id, c6.lease_token), (c7.id, c7.lease_token)],
        60.0,
        5.0,
        started=frozenset({(c6.id, c6.lease_token)}),
    )
    assert len(await h.backend.job_heartbeat_many(beat)) == 2  # J6 running, J7 claimed ahead
    h.at(195)
    await h.insert(job("a", "x"))  # J8
    h.at(200)


async def test_every_number_matches_a_hand_count(history: History) -> None:
    await craft(history)
    stats = await history.app.stats(window_s=300)
    assert stats.at == history.t0 + timedelta(seconds=200)
    assert stats.window_s == 300
    t = stats.total
    # live: J4 (reclaimed, b) and J8 (a) ready; J5 scheduled; J4 retrying; J7 claimed; J6 running
    assert (t.ready, t.scheduled, t.pending, t.retrying, t.claimed, t.running) == (2, 1, 3, 1, 1, 1)
    assert t.backlog_age_s == 200.0  # J4: a reclaim keeps its run_at (T0), its place and age
    # claims in the window: J1 10, J2 15 (its last), J3 10, J4 10, J6 40, J7 30
    assert (t.claim_latency_p50_s, t.claim_latency_p95_s, t.claim_latency_max_s) == (10, 40, 40)
    # finished in the window: J1 (1 attempt), J2 (2), J3 dead (1), J9 cancelled (never ran)
    assert (t.attempts_1, t.attempts_2, t.attempts_3, t.attempts_4_plus) == (2, 1, 0, 0)
    assert (t.completed, t.cancelled, t.dead, t.retries, t.failed) == (2, 1, 1, 1, 2)
    assert t.dead_rate_per_min == pytest.approx(0.2)
    assert (t.reclaims, t.reclaim_rate_per_min) == (1, pytest.approx(0.2))
    assert (t.run_duration_p50_s, t.run_duration_p95_s) == (2.0, 3.0)  # of 1.0, 2.0, 3.0
    assert t.throughput_per_s == pytest.approx(4 / 300)
    assert [g.name for g in stats.queues] == ["a", "b"]
    assert [g.name for g in stats.tasks] == ["x", "y", "z"]

    a, b = stats.queue("a"), stats.queue("b")
    assert a is not None and b is not None
    assert (a.ready, a.scheduled, a.claimed, a.running, a.backlog_age_s) == (1, 0, 1, 1, 5.0)
    assert (a.claim_latency_p50_s, a.claim_latency_p95_s) == (15, 40)  # 10 10 15 30 40
    assert (a.completed, a.dead, a.cancelled, a.reclaims) == (2, 1, 0, 0)
    assert (b.ready, b.scheduled, b.retrying, b.backlog_age_s) == (1, 1, 1, 200.0)
    assert (b.claim_latency_p50_s, b.claim_latency_max_s) == (10, 10)
    assert (b.cancelled, b.reclaims, b.attempts_1, b.run_duration_p50_s) == (1, 1, 0, None)

    x, y, z = stats.task("x"), stats.task("y"), stats.task("z")
    assert x is not None and y is not None and z is not None
    assert (x.claim_latency_p50_s, x.claim_latency_p95_s) == (15, 40)  # 10 15 40
    assert (y.claim_latency_p50_s, y.claim_latency_p95_s) == (10, 30)  # 10 30
    assert (x.run_duration_p50_s, x.run_duration_p95_s) == (1.0, 3.0)
    assert (x.attempts_1, x.attempts_2, x.retries, y.dead, y.failed) == (1, 1, 1, 1, 1)
    assert (z.reclaims, z.retrying, z.completed) == (1, 1, 0)


async def test_filters_and_the_window(history: History) -> None:
    await craft(history)
    only_b = await history.app.stats(queue="b", window_s=300)
    assert [g.name for g in only_b.queues] == ["b"] and [g.name for g in only_b.tasks] == ["z"]
    assert only_b.total.claim_latency_max_s == 10 and only_b.total.reclaims == 1
    only_y = await history.app.stats(task="y")
    assert [g.name for g in only_y.queues] == ["a"] and only_y.total.dead == 1
    # 60 s back from T0+200: only J6 and J7 were claimed, nothing finished or was reclaimed
    recent = await history.app.stats(window_s=60)
    r = recent.total
    assert (r.claim_latency_p50_s, r.claim_latency_max_s) == (30, 40)
    assert (r.completed, r.dead, r.reclaims, r.throughput_per_s) == (0, 0, 0, 0.0)
    assert r.ready == 2  # depths are now, whatever the window
    empty = await history.app.stats(queue="nothing-here")
    assert empty.queues == () and empty.total.backlog_age_s == 0.0
    assert empty.total.claim_latency_p50_s is None


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"window_s": 0}, "window_s"),
        ({"window_s": float("nan")}, "window_s"),
        ({"window_s": True}, "window_s"),
        ({"window_s": 31 * 86400}, "window_s"),
        ({"queue": ""}, "queue"),
        ({"task": 3}, "task"),
    ],
)
async def test_bad_arguments_are_refused_naming_them(
    app: skiplock.App, kwargs: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigurationError, match=f"^{named}="):
        await app.stats(**kwargs)  # type: ignore[arg-type]


def beat(worker_id: str, claimed_ago_s: float | None = None) -> WorkerBeatParams:
    return WorkerBeatParams(worker_id, "w", "host1", 42, ("a", "b"), 8, 3, 17, claimed_ago_s)


async def test_the_worker_registry(history: History) -> None:
    backend = history.backend
    await backend.worker_beat(beat("w:1"))
    history.at(30)
    await backend.worker_beat(beat("w:2", claimed_ago_s=5.0))
    history.at(40)
    await backend.worker_beat(beat("w:1", claimed_ago_s=1.0))  # an update, not a second row
    history.at(50)
    one, two = await history.app.workers()
    assert (one.id, two.id) == ("w:1", "w:2")
    assert (one.host, one.pid, one.queues, one.concurrency, one.running) == (
        "host1",
        42,
        ("a", "b"),
        8,
        3,
    )
    assert one.processed == 17 and one.started_at == history.t0
    assert one.heartbeat_at == history.t0 + timedelta(seconds=40)
    assert one.last_claim_at == history.t0 + timedelta(seconds=39)
    assert (one.silent_s, two.silent_s) == (10.0, 20.0)
    assert two.last_claim_at == history.t0 + timedelta(seconds=25)
    history.at(30 + 3600.5)
    assert await backend.worker_prune(3600) == 1  # w:2, silent since T0+30
    await backend.worker_delete("w:1")
    assert await history.app.workers() == []


async def test_a_running_worker_is_registered_and_its_jobs_measured(app: skiplock.App) -> None:
    @app.task(name="nap")
    async def nap() -> None:
        await asyncio.sleep(0.05)

    await nap.aenqueue()
    worker = skiplock.Worker(app, concurrency=3, queues=("default",), poll_interval_s=0.05)
    flushed = worker.signals.flushed.arm()
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 30)
    await flushed.wait()  # the outcome is in the table
    (me,) = await app.workers()
    assert (me.id, me.pid, me.concurrency, me.queues) == (worker.id, os.getpid(), 3, ("default",))
    assert me.silent_s < 30
    stats = await app.stats()
    assert stats.total.completed == 1 and stats.total.attempts_1 == 1
    assert stats.total.run_duration_p50_s is not None and stats.total.run_duration_p50_s >= 0.05
    assert stats.total.claim_latency_max_s is not None
    worker.request_stop()
    await asyncio.wait_for(run, 30)
    assert await app.workers() == []  # a worker that stops leaves the registry
