"""Sync tasks in child processes a timeout can kill (issue 47, ``executor="process"``): real
child processes of an in-process worker on both databases. A timed-out attempt's process is
gone when its outcome is written; the old thread behaviour is shown beside it (its code runs
on); children are recycled by count and by memory; a child that dies fails only its job;
exceptions, current_job(), progress and durable steps cross the pipe."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

import skiplock
from skiplock import JobState, Worker
from skiplock.errors import ConfigurationError

from .apps import process_app
from .helpers import Cli, await_until_async, cli_fixtures, running, wait_until

SPEC = "tests.apps.process_app:app"
cli, app = cli_fixtures(process_app, SPEC)
pytestmark = pytest.mark.slow  # real child processes, started with spawn


async def burst(app: skiplock.App, **options: Any) -> Worker:
    worker = Worker(app, poll_interval_s=0.05, **options)
    await worker.run(burst=True)
    return worker


def gone(pid: int) -> bool:
    """No such process, or only its zombie (ended; its exit not yet collected)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def pids_in(message: str) -> list[int]:
    return [int(p) for p in re.findall(r"pid (\d+)", message)]


async def test_a_busy_loop_and_a_blocking_c_call_are_killed_at_their_timeout_and_retried(
    app: skiplock.App, tmp_path: Path
) -> None:
    marks = [tmp_path / "spin.mark", tmp_path / "c.mark"]
    handles = [
        await process_app.spin.aenqueue(str(marks[0])),
        await process_app.c_sleep.aenqueue(str(marks[1])),
    ]
    await burst(app, concurrency=2)
    for handle in handles:
        job = await app.get_job(handle.id)
        assert job.state is JobState.DEAD and job.attempt == 2  # retried once, then dead
        for error in job.errors:
            assert "JobTimeout: timed out after 0.5s" in error["message"], error
            assert "was killed (SIGTERM)" in error["message"], error
            (pid,) = pids_in(error["message"])
            assert gone(pid) and pid != os.getpid()
    assert not any(mark.exists() for mark in marks)  # the killed code never ran on


async def test_a_timed_out_thread_runs_on_where_a_process_would_be_killed(
    app: skiplock.App, tmp_path: Path
) -> None:
    """The contrast: the same busy loop on a thread is recorded as timed out, and its code
    keeps running past it (it writes its mark after the outcome is in the table)."""
    mark, release = tmp_path / "thread.mark", tmp_path / "release"
    handle = await process_app.thread_spin.aenqueue(str(mark), str(release))
    await burst(app)
    job = await app.get_job(handle.id)
    assert job.state is JobState.DEAD
    assert "its thread cannot be killed" in job.errors[-1]["message"]
    assert not mark.exists()  # not yet: the outcome came at the timeout, the code runs on
    release.touch()
    wait_until(mark.exists, "the timed-out thread to run on and write its mark")
    assert mark.read_text() == str(os.getpid())  # on the worker's own process


async def test_children_are_recycled_after_max_tasks_per_child(app: skiplock.App) -> None:
    handles = [await process_app.whoami.aenqueue() for _ in range(6)]
    await burst(app, concurrency=1, child_processes=1, max_tasks_per_child=2)
    pids = [await (await app.job(h.id)).result() for h in handles]
    assert os.getpid() not in pids
    # each child ran two jobs, then was replaced (jobs claimed together may start out of order)
    assert sorted(pids.count(p) for p in set(pids)) == [2, 2, 2], pids
    control = [await process_app.whoami.aenqueue() for _ in range(6)]
    await burst(app, concurrency=1, child_processes=1)
    assert len({await (await app.job(h.id)).result() for h in control}) == 1


async def test_a_child_past_max_memory_is_replaced_after_the_job_that_crossed_it(
    app: skiplock.App,
) -> None:
    handles = [await process_app.leak.aenqueue(120) for _ in range(3)]
    await burst(app, concurrency=1, child_processes=1, max_memory_per_child_mb=100)
    pids = [await (await app.job(h.id)).result() for h in handles]
    assert len(set(pids)) == 3, pids  # each crossed 100 MiB, finished, and was replaced
    control = [await process_app.leak.aenqueue(1) for _ in range(3)]
    await burst(app, concurrency=1, child_processes=1, max_memory_per_child_mb=100)
    assert len({await (await app.job(h.id)).result() for h in control}) == 1


@pytest.mark.parametrize(
    ("how", "said"),
    [("exit", "exited with code 3"), ("kill", "killed by SIGKILL"), ("segfault", "SIGSEGV")],
)
async def test_a_child_that_dies_fails_only_its_job(app: skiplock.App, how: str, said: str) -> None:
    doomed = await process_app.die.aenqueue(how)
    after = [await process_app.whoami.aenqueue() for _ in range(3)]
    await burst(app, concurrency=1, child_processes=1)
    job = await app.get_job(doomed.id)
    assert job.state is JobState.DEAD and said in job.errors[-1]["message"], job.errors
    assert "ChildDied" in job.errors[-1]["message"]
    for handle in after:
        assert (await app.get_job(handle.id)).state is JobState.SUCCEEDED
    assert await app.counts() == {**{s: 0 for s in await app.counts()}, "dead": 1, "succeeded": 3}


PLANS = ["ok", "spin", "exit", "kill", "segfault", "leak"]


async def test_each_job_has_exactly_one_effect_in_the_database_across_kills_deaths_and_recycling(
    app: skiplock.App, db_url: str
) -> None:
    """Every way a child can end, mixed on one worker that also recycles by count and by
    memory: each job succeeds, and the database holds exactly one effect row for it, from the
    attempt its row says succeeded. A timed-out child not killed would write a second row
    late; a retry of a succeeded job, or a dead child's job run twice, a second one too."""
    conn = process_app.effect_connection(db_url)
    with conn:
        conn.execute(f"CREATE TABLE {process_app.EFFECTS} (job_id TEXT, attempt INT, pid INT)")
    handles = [await process_app.effect.aenqueue(db_url, PLANS[i % 6]) for i in range(24)]
    await burst(
        app, concurrency=2, child_processes=2, max_tasks_per_child=3, max_memory_per_child_mb=100
    )
    jobs = {str(h.id): await app.get_job(h.id) for h in handles}
    timeouts = [
        e["message"] for job in jobs.values() for e in job.errors if "JobTimeout" in e["message"]
    ]
    killed = [pid for message in timeouts for pid in pids_in(message)]
    assert len(killed) == 4, killed  # the four spin plans' first attempts
    wait_until(lambda: all(gone(pid) for pid in killed), "the timed-out children to be gone")
    conn = process_app.effect_connection(db_url)
    try:
        rows = conn.execute(f"SELECT job_id, attempt, pid FROM {process_app.EFFECTS}").fetchall()
    finally:
        conn.close()
    effects: dict[str, list[int]] = {}
    for job_id, attempt, _pid in rows:
        effects.setdefault(job_id, []).append(attempt)
    for i, (job_id, job) in enumerate(jobs.items()):
        plan = PLANS[i % 6]
        assert job.state is JobState.SUCCEEDED, (plan, job.errors)
        first_ran = plan in ("ok", "leak")
        assert job.attempt == (1 if first_ran else 2), (plan, job.attempt)
        assert effects.get(job_id) == [job.attempt], (plan, effects.get(job_id))
    assert len(rows) == len(jobs)
    assert {p for _, _, p in rows}.isdisjoint({os.getpid()})  # all written by children


async def test_an_exception_crosses_as_itself_or_as_its_text(app: skiplock.App) -> None:
    plain = await process_app.fails.aenqueue("boom")
    odd = await process_app.fails_oddly.aenqueue()
    await burst(app)
    error = (await app.get_job(plain.id)).errors[-1]
    assert error["message"] == "ValueError: boom" and error["type"] == "builtins.ValueError"
    error = (await app.get_job(odd.id)).errors[-1]
    assert "Unpicklable: one/two" in error["message"], error
    assert "in child process" in error["traceback"], error
    assert "raise Unpicklable" in error["traceback"], error  # the child's frames
    assert "raise ValueError(message)" in (await app.get_job(plain.id)).errors[-1]["traceback"]


async def test_current_job_progress_and_steps_work_in_the_child(app: skiplock.App) -> None:
    handle = await process_app.knows_itself.aenqueue(21)
    await burst(app)
    got = await handle.result()
    assert got["id"] == handle.id and got["attempt"] == 1 and got["step"] == 42
    assert got["pid"] != os.getpid()
    job = await app.get_job(handle.id)
    assert job.progress is not None and job.progress["message"] == "half way"


async def test_a_worker_wide_default_runs_every_sync_task_in_a_child(app: skiplock.App) -> None:
    handle = await process_app.on_thread.aenqueue()
    await burst(app, sync_executor="process")
    assert await handle.result() != os.getpid()
    other = await process_app.on_thread.aenqueue()
    await burst(app)
    assert await other.result() == os.getpid()


def test_a_process_task_must_be_sync_and_importable(tmp_path: Path) -> None:
    app = skiplock.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    with pytest.raises(ConfigurationError, match="executor='process' is for sync functions"):

        @app.task(executor="process")
        async def later() -> None: ...

    with pytest.raises(ConfigurationError, match="must be a module-level function"):

        @app.task(executor="process")
        def nested() -> None: ...

    with pytest.raises(ConfigurationError, match="executor="):
        app.task(executor="fork")(process_app.whoami.fn)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_memory_per_child_mb"):
        skiplock.WorkerConfig(max_memory_per_child_mb=0)


async def test_the_cli_worker_runs_sync_tasks_in_children_and_lets_them_finish_on_sigterm(
    cli: Cli, app: skiplock.App, tmp_path: Path
) -> None:
    """As a user starts it (every other option at its default): a SIGTERM while a child runs
    a job lets the job finish in its grace, as a thread's would, and the worker exits 0."""
    started = tmp_path / "started"
    handle = await process_app.nap.aenqueue(1.5, str(started))
    proc = cli.start("--sync-executor", "process")
    await asyncio.to_thread(wait_until, started.exists, "the job's code to start in a child")
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 60) == 0, cli.output()
    job = await app.get_job(handle.id)
    if job.state is not JobState.SUCCEEDED:
        pytest.fail(f"{job.state}: {job.errors}\n{cli.output()}")
    pid = job.result
    assert isinstance(pid, int) and pid != proc.pid  # it ran in a child
    assert int(started.read_text()) == pid
    wait_until(lambda: gone(pid), "the child to end with its worker")


async def test_wait_for_parks_from_the_child_and_a_signal_resumes_it(app: skiplock.App) -> None:
    handle = await process_app.waits_for_go.aenqueue()
    async with running(app, concurrency=2):

        async def parked() -> bool:
            return (await app.get_job(handle.id)).state is JobState.WAITING

        await await_until_async(parked, "the job to park on its signal", timeout=60)
        await app.signal(handle.id, "go", {"n": 7})
        got = await handle.result(timeout=60)
    assert got["got"] == {"n": 7} and got["pid"] != os.getpid()
    assert (await app.get_job(handle.id)).state is JobState.SUCCEEDED


async def test_each_worker_of_processes_n_has_its_own_children(cli: Cli, app: skiplock.App) -> None:
    handles = [await process_app.nap.aenqueue(0.3) for _ in range(8)]
    proc = cli.start(
        "--processes", "2", "--sync-executor", "process", "--concurrency", "1", "--prefetch", "0"
    )  # one job at a time each: both workers take some

    async def all_done() -> bool:
        states = {(await app.get_job(h.id)).state for h in handles}
        return states == {JobState.SUCCEEDED}

    await await_until_async(all_done, "every job to succeed", timeout=120)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 60) == 0, cli.output()
    jobs = [await app.get_job(h.id) for h in handles]
    children = {j.result for j in jobs}
    workers = {int(str(j.worker).split(":")[1]) for j in jobs}  # host:pid:... of the worker
    assert len(workers) == 2, workers  # both worker processes ran jobs...
    assert children.isdisjoint(workers | {proc.pid})  # ...each in children of its own
    assert len(children) >= 2


async def test_typed_arguments_and_results_are_rebuilt_in_the_child(app: skiplock.App) -> None:
    handle = await process_app.moved.aenqueue(process_app.Point(1, 2), 3)
    bad = await process_app.unstorable.aenqueue()
    await burst(app)
    assert await handle.result() == process_app.Point(4, 5)
    assert (await app.get_job(handle.id)).result == {"x": 4, "y": 5}  # stored as JSON
    job = await app.get_job(bad.id)
    assert job.state is JobState.DEAD and job.attempt == 1, job  # dead at once, as on a thread
    assert "UnstorableResult" in job.errors[-1]["message"]


async def test_skiplock_workers_lists_a_workers_children(cli: Cli, app: skiplock.App) -> None:
    """The children ride the worker's beat into the registry; the CLI shows them."""
    handles = [await process_app.whoami.aenqueue() for _ in range(3)]
    proc = cli.start("--concurrency", "1", "--maintenance-interval", "0.2")

    pids = {await (await app.job(h.id)).result() for h in handles}

    async def listed() -> bool:  # the beat after the third job (one before it showed fewer)
        shown = json.loads((await asyncio.to_thread(cli.run, "workers", SPEC, "--json")).stdout)
        return any(c["jobs"] == 3 for w in shown["workers"] for c in w["children"])

    await await_until_async(
        listed, "a worker's child with its 3 jobs in skiplock workers --json", timeout=60
    )
    shown = json.loads((await asyncio.to_thread(cli.run, "workers", SPEC, "--json")).stdout)
    (worker,) = shown["workers"]
    (child,) = worker["children"]  # one slot: one child, reused
    assert pids == {child["pid"]} and child["jobs"] == 3 and child["rss_bytes"] > 2**20
    assert worker["pid"] == proc.pid != child["pid"]
    text = (await asyncio.to_thread(cli.run, "workers", SPEC)).stdout
    assert f"children: {child['pid']} (3 jobs," in text, text
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 60) == 0
