"""Waiting for results: handles woken by the completion, in process and across processes."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

import skiplock
from skiplock import Cancel, JobCancelled, JobFailed

from .apps import cli_app
from .conftest import PG_URL
from .helpers import APP, Cli, running


async def test_result_comes_back_from_an_async_and_a_sync_task(app: skiplock.App) -> None:
    @app.task(name="a")
    async def a(x: int) -> dict[str, int]:
        return {"x": x}

    @app.task(name="s")
    def s(x: int) -> list[int]:
        return [x, x]

    ha, hs = await a.aenqueue(1), await s.aenqueue(2)
    async with running(app):
        assert await ha.result(timeout=20) == {"x": 1}
        assert await hs.result(timeout=20) == [2, 2]


async def test_a_dead_job_raises_job_failed_with_the_handlers_message(app: skiplock.App) -> None:
    @app.task(name="boom", max_attempts=1)
    def boom() -> None:
        raise ValueError("the handler's message")

    handle = await boom.aenqueue()
    async with running(app):
        with pytest.raises(JobFailed, match="the handler's message") as caught:
            await handle.result(timeout=20)
    assert caught.value.job_id == handle.id
    assert caught.value.error_type == "ValueError"
    assert caught.value.error_message == "the handler's message"
    assert 'raise ValueError("the handler' in caught.value.traceback


async def test_a_cancelled_job_raises_job_cancelled(app: skiplock.App) -> None:
    @app.task(name="nope")
    async def nope() -> None:
        raise Cancel("not wanted")

    @app.task(name="later")
    async def later() -> None:
        pass

    raised = await nope.aenqueue()
    pending = await later.using(run_after=timedelta(hours=1)).aenqueue()
    await app.cancel_job(pending.id)
    async with running(app):
        with pytest.raises(JobCancelled, match="not wanted"):
            await raised.result(timeout=20)
    with pytest.raises(JobCancelled):
        await pending.result(timeout=20)


async def test_a_timeout_raises_and_leaves_the_job_to_finish(app: skiplock.App) -> None:
    gate = asyncio.Event()

    @app.task(name="gated")
    async def gated() -> str:
        await gate.wait()
        return "done"

    handle = await gated.aenqueue()
    async with running(app):
        with pytest.raises(TimeoutError):
            await handle.result(timeout=0.2)
        gate.set()
        assert await handle.result(timeout=20) == "done"


async def test_app_job_rebuilds_a_handle_and_gather_waits_for_many(app: skiplock.App) -> None:
    @app.task(name="sq")
    def sq(x: int) -> int:
        if x == 3:
            raise Cancel("three")
        return x * x

    handles = await app.enqueue_many(sq.prepare(i) for i in range(5))
    rebuilt = await app.job(handles[2].id)
    assert (rebuilt.id, rebuilt.task, rebuilt.queue) == (handles[2].id, "sq", "default")
    with pytest.raises(skiplock.JobNotFound):
        await app.job(10**9)
    async with running(app):
        results = await app.gather(handles, timeout=20, return_exceptions=True)
        assert results[:3] == [0, 1, 4] and results[4] == 16
        assert isinstance(results[3], JobCancelled)
        with pytest.raises(JobCancelled):
            await app.gather(handles, timeout=20)
        assert await rebuilt.result(timeout=20) == 4


async def test_waiting_for_a_job_that_does_not_exist_raises_job_not_found(
    app: skiplock.App,
) -> None:
    with pytest.raises(skiplock.JobNotFound):
        await app.gather([skiplock.JobHandle(10**9, "x", "default", app)], timeout=5)


async def test_result_sync_from_code_without_a_loop(db_url: str) -> None:
    app = skiplock.App(db_url)
    await app.migrate()

    @app.task(name="hello")
    def hello(name: str) -> str:
        return f"hello {name}"

    try:
        handle = await asyncio.to_thread(hello.enqueue, "you")
        async with running(app):
            assert await asyncio.to_thread(handle.result_sync, 20) == "hello you"
    finally:
        await app.close()


async def test_negative_timeout_is_refused(app: skiplock.App) -> None:
    with pytest.raises(ValueError, match="timeout"):
        await app.gather([], timeout=-1)


async def _count_done_notifications(app: skiplock.App) -> tuple[asyncpg.Connection, list[str]]:
    backend = await app.backend()
    seen: list[str] = []
    conn = await asyncpg.connect(PG_URL)
    await conn.add_listener(
        backend.done_channel,  # type: ignore[attr-defined]
        lambda _c, _p, _ch, payload: seen.append(payload),
    )
    return conn, seen


async def test_two_thousand_handles_awaited_together(app: skiplock.App) -> None:
    """Every result arrives, with far fewer completion notifications (PostgreSQL: counted on
    the channel) and outcome queries than jobs."""

    @app.task(name="ident")
    def ident(i: int) -> int:
        return i

    handles = await app.enqueue_many(ident.prepare(i) for i in range(2000))
    pg = app.url.startswith("postgres")
    conn, notes = await _count_done_notifications(app) if pg else (None, [])
    try:
        gathering = asyncio.create_task(app.gather(handles, timeout=120))
        async with running(app, concurrency=50):
            assert await gathering == list(range(2000))
        waiters = await app._results._loop_waiters()
    finally:
        if conn is not None:
            await conn.close()
    assert waiters.checks < 200, waiters.checks
    if pg:
        ids = [int(i) for note in notes for i in note.split(",")]
        assert sorted(ids) == sorted(h.id for h in handles)
        assert len(notes) < 200, len(notes)
        assert max(len(n) for n in notes) < 8000


@pytest.mark.slow
async def test_results_come_back_from_a_cli_worker_in_another_process(
    db_url: str, tmp_path: Path
) -> None:
    """A real ``skiplock worker`` subprocess runs the jobs; this process only waits."""
    cli = Cli(db_url, tmp_path)
    assert cli.run("migrate", APP).returncode == 0
    cli_app.app.url = db_url
    try:
        ha = await cli_app.add.aenqueue(2, 3)
        hs = await cli_app.add_sync.aenqueue(4, 5)
        hf = await cli_app.fail.aenqueue("it broke")
        hc = await cli_app.cancel_me.aenqueue()
        # no backstop within the test's time: only the completion's wake-up can answer
        (await cli_app.app._results._loop_waiters()).backstop_s = 600
        cli.start()
        assert await ha.result(timeout=30) == {"sum": 5}
        assert await hs.result(timeout=30) == [4, 5, 9]
        with pytest.raises(JobFailed, match="it broke"):
            await hf.result(timeout=30)
        with pytest.raises(JobCancelled, match="not wanted"):
            await hc.result(timeout=30)
        record = await ha.fetch()
        assert record.worker is not None and record.started_at is not None
    finally:
        cli.stop_all()
        await cli_app.app.close()


async def test_an_error_in_the_result_watch_is_logged_at_once_and_fails_the_wait(
    app: skiplock.App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The watch is a detached Service: a bug in it is logged when it happens and fails the
    waits it served (before: they hung until their timeout), and the next wait restarts it."""

    @app.task(name="one")
    async def one() -> int:
        return 1

    handle = await one.aenqueue()
    waiters = await app._results._loop_waiters()
    real = waiters._backend.job_outcome_many
    calls = 0

    async def broken_once(ids: list[int]) -> list[skiplock.JobOutcome]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug in the watch")
        return await real(ids)

    monkeypatch.setattr(waiters._backend, "job_outcome_many", broken_once)
    with pytest.raises(RuntimeError, match="a bug in the watch"):
        await handle.result(timeout=10)
    assert "result watch died" in caplog.text
    async with running(app):
        assert await handle.result(timeout=20) == 1
