"""One view over several databases (issue 46): an id acts on the database it names, the
reads show every database and say which each part is of, and the operations act database by
database on exactly what they preview, a limit never exceeded in total.

The second database is a real one (``CREATE DATABASE`` on the test server); its jobs are
written straight to its backend, as enqueue routing is not what these tests are about."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import skiplock
from skiplock import Database, JobFilter, JobState
from skiplock._backends.params import JobInsertManyParams, NewJob
from skiplock._lanes import ID_SPAN
from skiplock.errors import ConfigurationError, JobNotFound

from .backends.helpers import bury_many
from .helpers import ROOT, await_until, running

SPEC = "tests.apps.two_db_app:app"


@pytest.fixture
def app(two_db_app: skiplock.App) -> skiplock.App:
    return two_db_app


async def insert(app: skiplock.App, database: str, queue: str = "q", n: int = 1) -> list[int]:
    backend = await app.backend(database=database)
    jobs = [NewJob("t", queue, "[]", "{}", 0, 3) for _ in range(n)]
    return list(await backend.job_insert_many(JobInsertManyParams(jobs)))


async def bury(app: skiplock.App, database: str, n: int) -> list[int]:
    return await bury_many(await app.backend(database=database), "t", ["boom"] * n, queue="q")


def cli(
    app: skiplock.App, *args: str, other: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m skiplock ARGS`` on the two-database test app (``other``: b's URL, if not
    the App's)."""
    env = {
        **os.environ,
        "SKIPLOCK_DATABASE_URL": app.url,
        "SKIPLOCK_TEST_OTHER_URL": other or app.url_of("b"),
        "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}",
    }
    return subprocess.run(
        [sys.executable, "-m", "skiplock", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


DOWN = "postgresql://postgres@127.0.0.1:1/nowhere"
"""A database that is down: nothing listens on port 1."""


# -- by id, the id's database ----------------------------------------------------------------


async def test_an_id_acts_on_the_database_it_names(app: skiplock.App) -> None:
    (own,) = await insert(app, "default")
    (other,) = await insert(app, "b")
    assert other > ID_SPAN
    assert (await app.get_job(other)).id == other
    assert (await app.job(other)).id == other
    assert (await app.job_links(other)).parents == []
    assert await app.cancel_job(other) is JobState.CANCELLED
    assert (await app.get_job(other)).state is JobState.CANCELLED
    assert (await app.get_job(own)).state is JobState.PENDING  # the other database's untouched
    assert await app.retry_job(other)
    assert (await app.get_job(other)).state is JobState.PENDING
    assert (await app.wait_for_outcomes([], 0)) == {}
    await app.cancel_job(own)
    await app.cancel_job(other)
    outcomes = await app.wait_for_outcomes([own, other], timeout=10)
    assert {i: o.state for i, o in outcomes.items()} == {
        own: JobState.CANCELLED,
        other: JobState.CANCELLED,
    }
    with pytest.raises(ConfigurationError, match="database number 5"):
        await app.get_job(5 * ID_SPAN + 1)
    with pytest.raises(JobNotFound):
        await app.get_job(other + 1000)


async def test_a_list_of_ids_reads_each_id_in_its_own_database(app: skiplock.App) -> None:
    own = await insert(app, "default", n=2)
    other = await insert(app, "b", n=2)
    named = JobFilter(ids=(own[0], other[1]), limit=10)
    assert [j.id for j in await app.list_jobs(None, named)] == [other[1], own[0]]  # newest first
    oldest = await app.list_jobs(None, JobFilter(limit=3), oldest_first=True)
    assert [j.id for j in oldest] == [*own, other[0]]  # one order over both, the limit in total
    page = await app.list_jobs(None, JobFilter(limit=3), before_id=own[1], oldest_first=True)
    assert [j.id for j in page] == other
    assert await app.count_jobs(JobState.PENDING) == 4
    assert await app.count_jobs(JobState.PENDING, database="b") == 2


# -- reads over every database ---------------------------------------------------------------


async def test_the_reads_show_every_database_and_name_it(app: skiplock.App) -> None:
    await insert(app, "default", queue="own")
    await insert(app, "b", queue="far", n=2)
    queues = {(q.database, q.name): q.pending for q in await app.queues()}
    assert queues == {("default", "own"): 1, ("b", "far"): 2}
    assert [q.name for q in await app.queues(database="b")] == ["far"]
    stats = await app.stats(database="b")
    assert stats.database == "b" and stats.total.ready == 2
    assert (await app.stats()).database == "default"
    assert (await app.counts())["pending"] == 3
    with pytest.raises(ConfigurationError, match="no such database"):
        await app.stats(database="c")


async def test_workers_name_the_database_whose_registry_they_beat_into(
    app: skiplock.App,
) -> None:
    async with running(app, name="far-worker", database="b") as worker:
        await await_until(worker.ready.is_set, "the worker to be ready")
        assert ("far-worker", "b") in {(w.name, w.database) for w in await app.workers()}
        assert {w.database for w in await app.workers(database="b")} == {"b"}
        shown = cli(app, "workers", SPEC)
        assert shown.returncode == 0, shown.stderr
        (line,) = [x for x in shown.stdout.splitlines() if "far-worker" in x]
        assert " database=b " in line
        health = json.loads(cli(app, "health", SPEC, "--json").stdout)
        each = {d["database"]: d for d in health["databases"]}
        assert each["b"]["workers_beating"] >= 1 and each["b"]["healthy"]


async def test_waiting_jobs_of_every_database_by_id_the_limit_in_total(
    pg_url: str, other_db: str
) -> None:
    app = skiplock.App(
        pg_url,
        databases={"b": Database(other_db, number=1)},
        lanes={"eu": "b"},
        routes={"far": "eu"},
    )

    @app.task(name="own")
    async def own() -> None: ...

    @app.task(name="far", queue="far")
    async def far() -> None: ...

    try:
        await app.migrate()
        await skiplock.chain(own.s(), own.si()).aenqueue()
        await skiplock.chain(far.s(), far.si()).aenqueue()
        waiting = await app.waiting_jobs()
        assert [app.directory.name_of_id(w.id) for w in waiting] == ["default", "b"]
        assert [w.task for w in await app.waiting_jobs(limit=1)] == ["own"]
    finally:
        await app.close()


# -- operations ------------------------------------------------------------------------------


async def test_a_queue_pause_and_limits_are_written_to_every_database(app: skiplock.App) -> None:
    await insert(app, "b", queue="far")
    await app.pause_queue("far")  # known from database b's jobs alone
    assert (await app.queue_info("far")).paused
    assert (await app.queue_info("far", database="b")).paused
    await app.set_queue_limits("far", max_running=3)
    assert (await app.queue_info("far", database="b")).max_running == 3
    await app.resume_queue("far", database="b")
    assert not (await app.queue_info("far", database="b")).paused
    assert (await app.queue_info("far")).paused  # only the one named


async def test_a_task_pause_is_written_to_every_database(app: skiplock.App) -> None:
    await app.pause_task("t", reason="maintenance")
    assert {(p.task, p.database) for p in await app.task_pauses()} == {
        ("t", "default"),
        ("t", "b"),
    }
    assert [p.reason for p in await app.task_pauses(database="b")] == ["maintenance"]
    assert await app.resume_task("t")
    assert await app.task_pauses() == []


async def test_dead_requeue_acts_on_what_the_list_shows_the_limit_in_total(
    app: skiplock.App,
) -> None:
    own = await bury(app, "default", 2)
    other = await bury(app, "b", 3)
    where = JobFilter(task="t", limit=4)
    shown = [j.id for j in await app.list_jobs(JobState.DEAD, where, oldest_first=True)]
    assert shown == [*own, *other[:2]]
    assert await app.requeue_dead(where) == shown
    assert [j.id for j in await app.list_jobs(JobState.DEAD, where)] == [other[2]]
    assert await app.discard_dead(JobFilter(task="t", limit=5), database="default") == []
    assert await app.discard_dead(JobFilter(task="t", limit=5), database="b") == [other[2]]


async def test_ids_of_two_databases_are_split_each_acting_on_its_own(app: skiplock.App) -> None:
    own = await bury(app, "default", 2)
    other = await bury(app, "b", 2)
    named = JobFilter(ids=(own[1], other[0]), limit=2)
    assert [j.id for j in await app.list_jobs(JobState.DEAD, named, oldest_first=True)] == [
        own[1],
        other[0],
    ]
    assert await app.requeue_dead(named) == [own[1], other[0]]
    dead = await app.list_jobs(JobState.DEAD, JobFilter(limit=10), oldest_first=True)
    assert [j.id for j in dead] == [own[0], other[1]]
    with pytest.raises(ConfigurationError, match="database number 9"):
        await app.requeue_dead(JobFilter(ids=(own[0], 9 * ID_SPAN), limit=2))
    assert [j.id for j in await app.list_jobs(JobState.DEAD, JobFilter(limit=10))] == [
        other[1],
        own[0],
    ]  # nothing was touched: the whole batch refused first


async def test_prune_previews_and_prunes_each_database(app: skiplock.App) -> None:
    await bury(app, "default", 1)
    await bury(app, "b", 2)
    assert await app.prune_preview(finished_age_s=0, dead_age_s=0) == {"dead": 3}
    assert await app.prune_preview(finished_age_s=0, dead_age_s=0, database="b") == {"dead": 2}
    assert await app.prune(finished_age_s=0, dead_age_s=0, database="b") == 2
    assert await app.prune(finished_age_s=0, dead_age_s=0) == 1


# -- the CLI ---------------------------------------------------------------------------------


async def test_cli_job_show_and_cancel_find_the_id_in_its_database(app: skiplock.App) -> None:
    (other,) = await insert(app, "b")
    shown = cli(app, "job", "show", SPEC, str(other), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == other
    cancelled = cli(app, "job", "cancel", SPEC, str(other))
    assert cancelled.returncode == 0 and f"job {other} cancelled" in cancelled.stdout
    assert (await app.get_job(other)).state is JobState.CANCELLED
    nowhere = cli(app, "job", "show", SPEC, str(7 * ID_SPAN + 1))
    assert nowhere.returncode == 1
    assert "database number 7, which this App's databases= does not name" in nowhere.stderr
    assert len(nowhere.stderr.strip().splitlines()) == 1


async def test_cli_queue_list_workers_and_stats_show_every_database(app: skiplock.App) -> None:
    await insert(app, "default", queue="own")
    await insert(app, "b", queue="far", n=2)
    listed = cli(app, "queue", "list", SPEC)
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert "database=b pending=2" in lines["far"] and "database=default" in lines["own"]
    as_json = json.loads(cli(app, "queue", "list", SPEC, "--json").stdout)
    assert {(q["name"], q["database"]) for q in as_json["queues"]} >= {
        ("own", "default"),
        ("far", "b"),
    }
    stats = cli(app, "stats", SPEC, "--json")
    readings = [json.loads(line) for line in stats.stdout.splitlines()]
    assert [(r["database"], r["total"]["ready"]) for r in readings] == [("default", 1), ("b", 2)]
    workers = cli(app, "workers", SPEC, "--json")
    assert workers.returncode == 0 and json.loads(workers.stdout)["workers"] == []


async def test_cli_a_database_down_is_one_line_the_others_shown_exit_1(
    app: skiplock.App,
) -> None:
    await insert(app, "default", queue="own")
    for args in (("queue", "list", SPEC), ("stats", SPEC), ("workers", SPEC)):
        done = cli(app, *args, other=DOWN)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "database b:" in done.stdout + done.stderr
        assert "nowhere" not in done.stderr or "127.0.0.1:1" in done.stderr
    assert "own" in cli(app, "queue", "list", SPEC, other=DOWN).stdout
    health = cli(app, "health", SPEC, other=DOWN)
    assert health.returncode == 1 and "database b:" in health.stderr
    paused = cli(app, "queue", "pause", SPEC, "own", other=DOWN)  # known in default alone
    assert paused.returncode == 1
    assert paused.stdout.splitlines() == ["queue own paused in database default"]
    assert paused.stderr.startswith("database b: ") and len(paused.stderr.splitlines()) == 1
    assert (await app.queue_info("own")).paused


async def test_cli_queue_pause_says_each_database(app: skiplock.App) -> None:
    await insert(app, "b", queue="far")
    paused = cli(app, "queue", "pause", SPEC, "far")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.splitlines() == [
        "queue far paused in database default",
        "queue far paused in database b",
    ]
    assert (await app.queue_info("far", database="b")).paused


async def test_cli_dead_list_and_requeue_per_database_limit_in_total(app: skiplock.App) -> None:
    own = await bury(app, "default", 1)
    other = await bury(app, "b", 3)
    listed = cli(app, "dead", "list", SPEC, "--task", "t", "--limit", "3")
    assert listed.returncode == 0, listed.stderr
    assert "database default: 1 dead jobs" in listed.stdout
    assert "database b: 2 dead jobs" in listed.stdout
    assert "3 dead jobs of 4" in listed.stdout
    done = cli(app, "dead", "requeue", SPEC, "--task", "t", "--limit", "3")
    assert done.returncode == 0, done.stderr
    assert f"database default: requeued 1 jobs: {own}" in done.stdout
    assert f"database b: requeued 2 jobs: {other[:2]}" in done.stdout
    left = await app.list_jobs(JobState.DEAD, JobFilter(limit=10))
    assert [j.id for j in left] == [other[2]]
    one = cli(app, "dead", "discard", SPEC, "--task", "t", "--database", "default")
    assert one.returncode == 0 and "discarded 0 jobs" in one.stdout
    pruned = cli(app, "prune", SPEC, "--dry-run", "--dead-age", "0", "--database", "b")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith("database b: would delete 1 jobs")
    unknown = cli(app, "prune", SPEC, "--dry-run", "--database", "c")
    assert unknown.returncode != 0 and "no such database" in unknown.stderr


async def test_a_job_record_names_its_lane_and_database(pg_url: str, other_db: str) -> None:
    app = skiplock.App(pg_url, databases={"b": Database(other_db, number=1)}, lanes={"eu": "b"})

    @app.task(lane="eu")
    def far(n: int) -> None: ...

    @app.task
    def near(n: int) -> None: ...

    try:
        await app.migrate()
        there, here = await far.aenqueue(1), await near.aenqueue(2)
        got = await app.get_job(there.id)
        assert (got.lane, got.database) == ("eu", "b")
        got = await app.get_job(here.id)
        assert (got.lane, got.database) == ("default", "default")
        listed = {j.id: (j.lane, j.database) for j in await app.list_jobs()}
        assert listed == {there.id: ("eu", "b"), here.id: ("default", "default")}
        found = await app.find_jobs(str(there.id))
        assert [(j.lane, j.database) for j in found] == [("eu", "b")]
    finally:
        await app.close()
