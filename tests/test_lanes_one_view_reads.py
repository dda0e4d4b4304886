"""One view over several databases (issue 46), the reads with no job id to route by: the
audit trail, dead groups, the schedules' last runs, the blocked and the busiest keys read
every database (or the one named), merged in the one-database read's order, the limit in
total, each record naming its database.

The second database is a real one (``CREATE DATABASE`` on the test server); rows are
written straight to each database's backend (routing is not what these tests are about)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest

import skiplock
from skiplock import JobState
from skiplock._backends.params import CronSlotClaimParams, JobInsertManyParams
from skiplock._backends.workflow_params import WorkflowOpenBatchParams
from skiplock._job import Completion, Disposition
from skiplock._lanes import ID_SPAN
from skiplock.errors import ConfigurationError, JobNotFound

from .backends.helpers import bury_many, claim, new_job
from .helpers import ROOT

SPEC = "tests.apps.two_db_app:app"


@pytest.fixture
def app(two_db_app: skiplock.App) -> skiplock.App:
    return two_db_app


async def keyed(app: skiplock.App, database: str, key: str, n: int) -> None:
    """``n`` pending jobs of ``key`` in ``database``."""
    backend = await app.backend(database=database)
    jobs = [new_job("t", queue="q", concurrency_key=key) for _ in range(n)]
    await backend.job_insert_many(JobInsertManyParams(jobs))


async def blocked(app: skiplock.App, database: str, key: str) -> int:
    """An ordered ``key`` blocked in ``database`` by its dead first job, one job behind it;
    the dead job's id."""
    backend = await app.backend(database=database)
    jobs = [new_job("t", queue="q", concurrency_key=key, key_order="block") for _ in range(2)]
    await backend.job_insert_many(JobInsertManyParams(jobs))
    (first,) = await backend.job_get_available_keyed(claim(1, ("q",), f"tok-{database}"))
    await backend.job_set_state_if_running_many(
        [Completion(first.id, first.lease_token, Disposition.DEAD)]
    )
    return first.id


async def test_the_audit_trail_is_every_databases_newest_first(app: skiplock.App) -> None:
    await app.record_action("first", target="x")
    await app.pause_queue("q", create=True, database="b")  # recorded in b
    await app.record_action("last", target="y")
    trail = await app.audit_trail()
    assert [(e.what, e.database) for e in trail] == [
        ("last", "default"),
        ("pause queue", "b"),
        ("first", "default"),
    ]
    assert [e.what for e in await app.audit_trail(limit=2)] == ["last", "pause queue"]
    assert [e.what for e in await app.audit_trail(database="b")] == ["pause queue"]
    newest = trail[0]
    page = await app.audit_trail(before_id=newest.id, database="default")
    assert [e.what for e in page] == ["first"]
    with pytest.raises(ConfigurationError, match="give database= too"):
        await app.audit_trail(before_id=newest.id)


async def test_dead_groups_of_every_database_each_naming_its_own(app: skiplock.App) -> None:
    await bury_many(await app.backend(), "t", ["boom"], queue="q")
    await bury_many(await app.backend(database="b"), "t", ["boom", "boom", "bang"], queue="q")
    groups = [(g.database, g.error, g.count) for g in await app.dead_groups()]
    assert groups == [("b", "boom", 2), ("b", "bang", 1), ("default", "boom", 1)]
    assert [(g.database, g.count) for g in await app.dead_groups(limit=1)] == [("b", 2)]
    assert [g.database for g in await app.dead_groups(database="default")] == ["default"]
    last = (await app.dead_groups(database="b"))[0].last_id
    assert (await app.get_job(last)).state is JobState.DEAD  # the example opens in its database


async def test_cron_last_runs_are_the_latest_slot_over_every_database(
    app: skiplock.App,
) -> None:
    async def slot(database: str, schedule: str, at: datetime) -> None:
        backend = await app.backend(database=database)
        await backend.cron_slot_claim(CronSlotClaimParams(schedule, at, new_job("t"), True))

    early, late = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    await slot("default", "moved", early)
    await slot("b", "moved", late)  # its owner moved to b: b holds its last run
    await slot("default", "own", late)
    await slot("b", "far", early)
    runs = [(r.schedule, r.slot, r.database) for r in await app.cron_last_runs()]
    assert runs == [("far", early, "b"), ("moved", late, "b"), ("own", late, "default")]
    assert [r.schedule for r in await app.cron_last_runs(database="default")] == ["moved", "own"]


async def test_blocked_keys_of_every_database_oldest_first(app: skiplock.App) -> None:
    own = await blocked(app, "default", "order:1")
    far = await blocked(app, "b", "order:2")
    keys = await app.blocked_keys()
    assert [(k.key, k.dead_job_id, k.waiting, k.database) for k in keys] == [
        ("order:1", own, 1, "default"),
        ("order:2", far, 1, "b"),
    ]
    assert [k.key for k in await app.blocked_keys(1)] == ["order:1"]
    assert [k.key for k in await app.blocked_keys(database="b")] == ["order:2"]
    stats = await app.stats(database="b")
    assert [(k.key, k.database) for k in stats.blocked_keys] == [("order:2", "b")]


async def test_busiest_keys_merged_over_every_database_the_limit_in_total(
    app: skiplock.App,
) -> None:
    await keyed(app, "default", "small", 1)
    await keyed(app, "b", "big", 3)
    await keyed(app, "default", "middle", 2)
    keys = [(k.key, k.ready, k.database) for k in await app.busiest_keys()]
    assert keys == [("big", 3, "b"), ("middle", 2, "default"), ("small", 1, "default")]
    assert [k.key for k in await app.busiest_keys(2)] == ["big", "middle"]
    assert [k.key for k in await app.busiest_keys(database="default")] == ["middle", "small"]
    with pytest.raises(ConfigurationError, match="no such database"):
        await app.busiest_keys(database="c")


async def test_one_database_reads_name_default(pg_url: str) -> None:
    app = skiplock.App(pg_url)
    try:
        await app.migrate()
        await app.record_action("alone", target="z")
        (entry,) = [e for e in await app.audit_trail(limit=1)]
        assert entry.what == "alone" and entry.database == "default"
        assert (await app.audit_trail(before_id=entry.id + 1, limit=1))[0].id == entry.id
    finally:
        await app.close()


# -- the CLI ---------------------------------------------------------------------------------


def cli(app: skiplock.App, *args: str, spec: str = SPEC) -> subprocess.CompletedProcess[str]:
    """``python -m skiplock ARGS`` on a two-database test app."""
    env = {
        **os.environ,
        "SKIPLOCK_DATABASE_URL": app.url,
        "SKIPLOCK_TEST_OTHER_URL": app.url_of("b"),
        "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}",
    }
    command = [sys.executable, "-m", "skiplock", *args[:2], spec, *args[2:]]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


async def test_cli_queue_pause_resume_and_limit_take_one_database(app: skiplock.App) -> None:
    await app.pause_queue("q", create=True)
    resumed = cli(app, "queue", "resume", "q", "--database", "b")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines() == ["queue q resumed in database b"]
    assert not (await app.queue_info("q", database="b")).paused
    assert (await app.queue_info("q")).paused  # the other database untouched
    paused = cli(app, "queue", "pause", "q", "--database", "b")
    assert paused.stdout.splitlines() == ["queue q paused in database b"]
    assert (await app.queue_info("q", database="b")).paused
    limited = cli(app, "queue", "limit", "q", "--max-running", "4", "--database", "default")
    assert limited.returncode == 0, limited.stderr
    assert limited.stdout.startswith("queue q in database default: max_depth=None max_running=4")
    assert (await app.queue_info("q", database="b")).max_running is None
    unknown = cli(app, "queue", "pause", "q", "--database", "c")
    assert unknown.returncode != 0 and "no such database" in unknown.stderr


async def test_cli_cron_list_shows_each_schedules_database_and_latest_slot(
    app: skiplock.App,
) -> None:
    at = datetime(2026, 1, 2, 4, tzinfo=UTC)
    backend = await app.backend(database="b")
    await backend.cron_slot_claim(CronSlotClaimParams("far-nightly", at, new_job("t"), True))
    spec = "tests.apps.two_db_cron_app:app"
    shown = cli(app, "cron", "list", spec=spec)
    assert shown.returncode == 0, shown.stderr
    far = shown.stdout.split("far-nightly\n", 1)[1]
    assert far.splitlines()[1] == "  database b"
    assert "  last     2026-01-02 04:00:00 UTC" in far
    listed = json.loads(cli(app, "cron", "list", "--json", spec=spec).stdout)["schedules"]
    each = {s["id"]: (s["database"], s["last_slot"]) for s in listed}
    assert each == {
        "own-nightly": ("default", None),
        "far-nightly": ("b", "2026-01-02T04:00:00+00:00"),
    }


async def test_batch_info_reads_the_database_named(app: skiplock.App) -> None:
    """A batch id is its database's own number: the App's own by default, another's by
    name (a job's page reads its batch in the job's database)."""
    far = await app.backend(database="b")
    batch = await far.workflow_open_batch(WorkflowOpenBatchParams(new_job("t"), None, None))
    info = await app.batch_info(batch, database="b")
    assert info.id == batch and not info.closed and info.on_success is not None
    assert info.on_success > ID_SPAN  # its callback is a job of database b
    with pytest.raises(JobNotFound):  # the App's own database has no batch yet
        await app.batch_info(batch)
    with pytest.raises(ConfigurationError, match="no such database"):
        await app.batch_info(batch, database="c")


async def test_cli_job_batch_reads_the_database_named(app: skiplock.App) -> None:
    far = await app.backend(database="b")
    batch = await far.workflow_open_batch(WorkflowOpenBatchParams(new_job("t"), None, None))
    shown = cli(app, "job", "batch", str(batch), "--database", "b", "--json")
    assert shown.returncode == 0, shown.stderr
    read = json.loads(shown.stdout)
    assert (read["id"], read["database"]) == (batch, "b") and read["on_success"] > ID_SPAN
    own = cli(app, "job", "batch", str(batch))  # the App's own database has no such batch
    assert own.returncode == 1 and len(own.stderr.strip().splitlines()) == 1


async def test_find_jobs_newest_first_over_every_database(app: skiplock.App) -> None:
    found_in: dict[str, int] = {}
    for database in ("default", "b"):
        backend = await app.backend(database=database)
        job = new_job("t", queue="q", correlation_id="order-7")
        (found_in[database],) = await backend.job_insert_many(JobInsertManyParams([job]))
    assert [j.id for j in await app.find_jobs("order-7")] == [found_in["b"], found_in["default"]]
    assert [j.id for j in await app.find_jobs("order-7", limit=1)] == [found_in["b"]]
    only = await app.find_jobs("order-7", database="default")
    assert [j.id for j in only] == [found_in["default"]]
    assert [j.id for j in await app.find_jobs(str(found_in["b"]))] == [found_in["b"]]
    assert await app.find_jobs(str(found_in["b"]), database="default") == []
