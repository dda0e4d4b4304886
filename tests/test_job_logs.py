"""A job's own log (issue 47, ``job_log=True``): the records an attempt logs while it runs are
kept with that attempt, on both databases, through a real worker. Interleaved jobs' lines never
mix (async jobs on one loop, sync jobs on threads, a process task's child), the byte cap keeps
the tail and says the cut, a task without the option keeps nothing, each attempt keeps its
own, the prune removes them with their jobs, and ``job show --json`` carries them."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

import skiplock
from skiplock import JobState, Worker
from skiplock._cli.task import task_details
from skiplock._config import WorkerConfig
from skiplock._job_log import JobLog
from skiplock._worker.services import Pruner

from .apps import job_log_app
from .helpers import Cli, documented, keys, parsed, run

log = logging.getLogger("tests.job_logs")
log.setLevel(logging.DEBUG)  # INFO and DEBUG reach the handlers, whatever the root's level


async def burst(app: skiplock.App, **options: Any) -> Worker:
    worker = Worker(app, poll_interval_s=0.05, **options)
    await worker.run(burst=True)
    return worker


def messages(job_log: JobLog) -> list[tuple[str, str]]:
    return [(line.level, line.message) for line in job_log.lines if line.logger == log.name]


async def test_two_interleaved_async_jobs_keep_only_their_own_lines_in_order(
    app: skiplock.App,
) -> None:
    """Two jobs on one loop take turns line by line (an Event handshake): each log holds its
    own lines alone, in order, with their levels."""
    turns = {"a": asyncio.Event(), "b": asyncio.Event()}

    @app.task(job_log=True)
    async def chatty(me: str, other: str) -> None:
        for i in range(5):
            if me == "b" or i > 0:
                await asyncio.wait_for(turns[me].wait(), 30)  # a failure, never a hang
            turns[me].clear()
            log.info("%s says %d", me, i)
            if i % 2:
                log.warning("%s warns %d", me, i)
            turns[other].set()

    a = await chatty.aenqueue("a", "b")
    b = await chatty.aenqueue("b", "a")
    await burst(app, concurrency=2)
    for handle, me in ((a, "a"), (b, "b")):
        assert (await app.get_job(handle.id)).state is JobState.SUCCEEDED
        (kept,) = await app.job_logs(handle.id)
        assert kept.attempt == 1 and kept.cut_lines == 0 and kept.cut_bytes == 0
        expected = []
        for i in range(5):
            expected.append(("INFO", f"{me} says {i}"))
            if i % 2:
                expected.append(("WARNING", f"{me} warns {i}"))
        assert messages(kept) == expected


async def test_sync_jobs_on_threads_keep_their_own_lines(app: skiplock.App) -> None:
    """Two sync jobs, each on a thread of the pool, interleave through a barrier; one with a
    timeout (run under a Task) and one without (the pool's direct path)."""
    barrier = threading.Barrier(2, timeout=30)

    @app.task(job_log=True)
    def plain(me: str) -> None:
        for i in range(4):
            barrier.wait()
            log.info("%s line %d", me, i)

    @app.task(job_log=True, timeout=60)
    def timed(me: str) -> None:
        for i in range(4):
            barrier.wait()
            log.error("%s line %d", me, i)

    p = await plain.aenqueue("p")
    t = await timed.aenqueue("t")
    await burst(app, concurrency=2)
    (p_log,) = await app.job_logs(p.id)
    (t_log,) = await app.job_logs(t.id)
    assert messages(p_log) == [("INFO", f"p line {i}") for i in range(4)]
    assert messages(t_log) == [("ERROR", f"t line {i}") for i in range(4)]


async def test_the_cap_keeps_the_tail_and_says_the_cut(app: skiplock.App) -> None:
    @app.task(job_log=True, job_log_bytes=1024)
    def verbose() -> None:
        for i in range(200):
            log.info("line %03d %s", i, "x" * 40)

    handle = await verbose.aenqueue()
    await burst(app)
    (kept,) = await app.job_logs(handle.id)
    assert len(kept.lines_json().encode()) <= 1024
    assert kept.cut_lines > 0 and kept.cut_lines + len(kept.lines) == 200
    assert kept.cut_bytes > 0
    assert kept.lines[-1].message.startswith("line 199 ")  # the tail is kept
    numbers = [int(line.message.split()[1]) for line in kept.lines]
    assert numbers == list(range(200 - len(kept.lines), 200))


async def test_a_task_without_job_log_keeps_nothing_and_the_app_default_applies(
    db_url: str,
) -> None:
    app = skiplock.App(db_url)
    await app.migrate()
    keeping = skiplock.App(db_url, job_log=True)
    try:

        @app.task
        async def quiet() -> None:
            log.warning("not kept")

        @app.task(job_log=True)
        async def kept_here() -> None:
            log.warning("kept")

        @keeping.task(name="app_wide")
        async def app_wide() -> None:
            log.warning("kept app-wide")

        @keeping.task(name="opted_out", job_log=False)
        async def opted_out() -> None:
            log.warning("not kept either")

        q = await quiet.aenqueue()
        k = await kept_here.aenqueue()
        await burst(app)
        assert (await app.get_job(q.id)).state is JobState.SUCCEEDED
        assert await app.job_logs(q.id) == []
        assert [messages(x) for x in await app.job_logs(k.id)] == [[("WARNING", "kept")]]
        w = await app_wide.aenqueue()
        o = await opted_out.aenqueue()
        await burst(keeping)
        assert [messages(x) for x in await keeping.job_logs(w.id)] == [
            [("WARNING", "kept app-wide")]
        ]
        assert await keeping.job_logs(o.id) == []
    finally:
        await keeping.close()
        await app.close()


async def test_each_attempt_keeps_its_own_log_with_the_traceback(app: skiplock.App) -> None:
    @app.task(job_log=True, max_attempts=3, retry=skiplock.RetryPolicy(base_s=0.001, jitter=False))
    async def flaky() -> str:
        attempt = skiplock.current_job().attempt
        log.info("attempt %d starts", attempt)
        if attempt < 3:
            try:
                raise ValueError(f"boom {attempt}")
            except ValueError:
                log.exception("attempt %d failed", attempt)
                raise
        return "ok"

    handle = await flaky.aenqueue()
    for _ in range(3):
        await burst(app)
    assert (await app.get_job(handle.id)).state is JobState.SUCCEEDED
    logs = await app.job_logs(handle.id)
    assert [x.attempt for x in logs] == [1, 2, 3]
    for kept in logs[:2]:
        n = kept.attempt
        assert messages(kept)[0] == ("INFO", f"attempt {n} starts")
        level, failed = messages(kept)[1]
        assert level == "ERROR" and failed.startswith(f"attempt {n} failed\nTraceback")
        assert f"ValueError: boom {n}" in failed
    assert messages(logs[2]) == [("INFO", "attempt 3 starts")]


async def test_the_prune_removes_the_logs_with_their_jobs(app: skiplock.App) -> None:
    @app.task(job_log=True)
    async def noted(n: int) -> None:
        log.warning("note %d", n)

    @app.task(job_log=True, max_attempts=1)
    async def doomed() -> None:
        log.warning("doomed")
        raise RuntimeError("no")

    done = [await noted.aenqueue(n) for n in range(3)]
    dead = await doomed.aenqueue()
    await burst(app)
    for handle in [*done, dead]:
        assert len(await app.job_logs(handle.id)) == 1
    # Dead jobs kept (a long retention), finished ones pruned: only their logs go.
    assert await app.prune(finished_age_s=0, dead_age_s=10**6) == 3
    for handle in done:
        assert await app.job_logs(handle.id) == []
    assert len(await app.job_logs(dead.id)) == 1
    assert await app.prune(finished_age_s=0, dead_age_s=0) == 1
    assert await app.job_logs(dead.id) == []


async def test_the_workers_retention_prunes_the_logs(app: skiplock.App) -> None:
    @app.task(job_log=True)
    async def noted() -> None:
        log.warning("note")

    handle = await noted.aenqueue()
    await burst(app)
    assert len(await app.job_logs(handle.id)) == 1
    pruner = Pruner(await app.backend(), WorkerConfig(retention_finished_s=0.001))
    assert await pruner.prune_once() == 1
    assert await app.job_logs(handle.id) == []


async def test_job_show_prints_the_logs_and_json_carries_them(
    app: skiplock.App, db_url: str, tmp_path: Any
) -> None:
    @app.task(name="tests.test_job_logs.shown", job_log=True, job_log_bytes=512)
    async def shown() -> None:
        for i in range(30):
            log.info("shown %d", i)
        log.error("the end")

    handle = await shown.aenqueue()
    await burst(app)
    cli = Cli(db_url, tmp_path)
    value = parsed(await run(cli, "job", "show", "--url", db_url, str(handle.id), "--json"))
    logged = {key for key in keys(value) if key.startswith("logs")}
    assert logged == documented("`job show --json`'s `logs`")
    (entry,) = value["logs"]
    assert entry["attempt"] == 1 and entry["cut_lines"] > 0 and entry["cut_bytes"] > 0
    assert entry["lines"][-1]["level"] == "ERROR"
    assert entry["lines"][-1]["message"] == "the end"
    assert entry["lines"][-1]["logger"] == log.name
    text = await run(cli, "job", "show", "--url", db_url, str(handle.id))
    assert text.returncode == 0, text.stderr  # type: ignore[attr-defined]
    out = text.stdout  # type: ignore[attr-defined]
    assert f"log of attempt 1: {len(entry['lines'])} lines; {entry['cut_lines']} earlier" in out
    assert "ERROR    tests.job_logs: the end" in out


@pytest.mark.slow
async def test_a_process_tasks_log_is_kept(db_url: str) -> None:
    app = job_log_app.app
    app.url = db_url
    await app.migrate()
    try:
        handle = await job_log_app.in_child.aenqueue(3)
        await burst(app)
        job = await app.get_job(handle.id)
        assert job.state is JobState.SUCCEEDED, job.errors
        (kept,) = await app.job_logs(handle.id)
        child = [(x.level, x.message) for x in kept.lines if x.logger == job_log_app.log.name]
        assert child == [("INFO", f"child line {i}") for i in range(3)] + [
            ("WARNING", "child done")
        ]
    finally:
        await app.close()


async def test_the_workers_own_handlers_see_every_record_and_the_handler_goes_with_the_worker(
    app: skiplock.App, caplog: pytest.LogCaptureFixture
) -> None:
    """The records still reach the other handlers as before (caplog's, on the root logger),
    an attempt that logs nothing writes no row, and the root logger's handlers are as they
    were once the worker stopped."""

    @app.task(job_log=True)
    async def speaks() -> None:
        log.warning("heard twice")

    @app.task(job_log=True)
    async def silent() -> None:
        pass

    before = list(logging.getLogger().handlers)
    s = await speaks.aenqueue()
    q = await silent.aenqueue()
    with caplog.at_level(logging.WARNING, logger=log.name):
        await burst(app)
    assert [r.getMessage() for r in caplog.records if r.name == log.name] == ["heard twice"]
    assert [messages(x) for x in await app.job_logs(s.id)] == [[("WARNING", "heard twice")]]
    assert (await app.get_job(q.id)).state is JobState.SUCCEEDED
    assert await app.job_logs(q.id) == []
    assert logging.getLogger().handlers == before


def test_the_options_are_checked_at_the_edge(tmp_path: Any) -> None:
    app = skiplock.App(f"sqlite:///{tmp_path}/t.db")
    with pytest.raises(skiplock.ConfigurationError, match="job_log_bytes"):
        app.task(name="small", job_log=True, job_log_bytes=10)(lambda: None)
    with pytest.raises(skiplock.ConfigurationError, match="job_log"):
        app.task(name="word", job_log="yes")(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(skiplock.ConfigurationError, match="job_log_bytes"):
        skiplock.App(f"sqlite:///{tmp_path}/t.db", job_log_bytes=2**30)
    with pytest.raises(skiplock.ConfigurationError, match="job_log"):
        skiplock.App(f"sqlite:///{tmp_path}/t.db", job_log=1)  # type: ignore[arg-type]
    keeping = skiplock.App(f"sqlite:///{tmp_path}/t.db", job_log=True, job_log_bytes=4096)
    task = keeping.task(name="t")(lambda: None)
    listed = {k: v for k, v in task_details(task, []).items() if k.startswith("job_log")}
    assert listed == {"job_log": True, "job_log_bytes": 4096}
