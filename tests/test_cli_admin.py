"""``skiplock queue|task|job|dead`` through the real CLI, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest

import skiplock
from skiplock import JobState, Worker
from skiplock._backends.params import ClaimParams

from .apps import cli_app
from .backends.helpers import bury_many
from .helpers import APP, Cli, cli_fixtures, ok, run

pytestmark = pytest.mark.slow

cli, app = cli_fixtures(cli_app)


async def test_queue_commands(cli: Cli, app: skiplock.App) -> None:
    assert "paused" in ok(await run(cli, "queue", "pause", APP, "default"))
    listing = ok(await run(cli, "queue", "list", APP))
    assert "default" in listing and "paused=yes" in listing
    ok(await run(cli, "queue", "resume", APP, "default"))
    ok(await run(cli, "queue", "limit", APP, "default", "--max-depth", "1", "--rate", "5"))
    await cli_app.record.aenqueue(1)
    with pytest.raises(skiplock.QueueFull):
        await cli_app.record.aenqueue(2)
    assert "max_depth=1" in ok(await run(cli, "queue", "list", APP))
    unknown = await run(cli, "queue", "pause", APP, "nope")
    assert unknown.returncode == 1 and "unknown queue 'nope'" in unknown.stderr  # type: ignore[attr-defined]
    assert "--create" in unknown.stderr  # type: ignore[attr-defined]


async def test_queue_limit_sets_and_lists_aging(cli: Cli, app: skiplock.App) -> None:
    said = ok(await run(cli, "queue", "limit", APP, "default", "--aging", "30"))
    assert "aging_s=30.0" in said
    assert "aging_s=30.0" in ok(await run(cli, "queue", "list", APP))
    assert (await app.queue_info("default")).aging_s == 30.0
    ok(await run(cli, "queue", "limit", APP, "default", "--aging", "none"))
    assert (await app.queue_info("default")).aging_s is None


async def test_the_guides_two_limit_commands_in_a_row_keep_the_rate(
    cli: Cli, app: skiplock.App
) -> None:
    """docs/guides/queues.md runs these two in a row: the second, which sets aging, must not
    lift the concurrency and rate limits the first set a moment before."""
    url = ("--url", cli.url)
    first = ("email", "--max-depth", "10000", "--max-running", "50", "--rate", "20", "--create")
    ok(await run(cli, "queue", "limit", *url, *first))
    second = ("email", "--max-depth", "10000", "--aging", "30")
    said = ok(await run(cli, "queue", "limit", *url, *second))
    email = await app.queue_info("email")
    assert (email.max_depth, email.max_running, email.rate_per_s, email.aging_s) == (
        10000,
        50,
        20.0,
        30.0,
    )
    assert said.split() == [
        "queue",
        "email:",
        "max_depth=10000",
        "max_running=50",
        "rate_per_s=20.0",
        "aging_s=30.0",
    ]


@pytest.mark.parametrize(
    ("option", "value", "setting", "stored"),
    [
        ("--max-depth", "7", "max_depth", 7),
        ("--max-running", "3", "max_running", 3),
        ("--rate", "2.5", "rate_per_s", 2.5),
        ("--aging", "60", "aging_s", 60.0),
    ],
)
async def test_queue_limit_sets_one_setting_and_keeps_the_others(
    cli: Cli, app: skiplock.App, option: str, value: str, setting: str, stored: float
) -> None:
    """Each option alone changes its own setting; 'none' lifts that one alone."""
    every = {"max_depth": 100, "max_running": 10, "rate_per_s": 5.0, "aging_s": 30.0}
    await app.set_queue_limits("default", **every)  # type: ignore[arg-type]

    def settings(q: skiplock.QueueInfo) -> dict[str, object]:
        return {name: getattr(q, name) for name in every}

    ok(await run(cli, "queue", "limit", APP, "default", option, value))
    assert settings(await app.queue_info("default")) == {**every, setting: stored}
    ok(await run(cli, "queue", "limit", APP, "default", option, "none"))
    assert settings(await app.queue_info("default")) == {**every, setting: None}


async def test_queue_limit_with_nothing_to_set_says_so(cli: Cli, app: skiplock.App) -> None:
    await app.set_queue_limits("default", rate_per_s=5)
    said = await run(cli, "queue", "limit", APP, "default")
    assert said.returncode == 2  # type: ignore[attr-defined]
    assert "nothing to set" in said.stderr and "'none' to lift" in said.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in said.stderr  # type: ignore[attr-defined]
    assert (await app.queue_info("default")).rate_per_s == 5


async def test_queue_control_by_url_knows_a_queue_by_any_of_its_jobs(
    cli: Cli, app: skiplock.App
) -> None:
    """``--url`` (no tasks): a queue whose jobs all finished, and no setting, is known; a
    name nothing knows is refused saying to pass --create, and created with it."""
    await cli_app.fail.using(queue="email").aenqueue("kaput")
    await Worker(app, poll_interval_s=0.05, queues=("email",)).run(burst=True)
    assert await app.counts("email") == {**dict.fromkeys(await app.counts(), 0), "dead": 1}
    url = ("--url", cli.url)
    limited = ok(await run(cli, "queue", "limit", *url, "email", "--max-depth", "10000"))
    assert "queue email: max_depth=10000" in limited
    ok(await run(cli, "queue", "pause", *url, "email"))
    ok(await run(cli, "queue", "resume", *url, "email"))
    for verb in ("pause", "resume", "limit"):
        rate = ("--rate", "5") if verb == "limit" else ()
        new = await run(cli, "queue", verb, *url, "newsletters", *rate)
        assert new.returncode == 1, new.stdout  # type: ignore[attr-defined]
        assert "unknown queue 'newsletters'" in new.stderr and "--create" in new.stderr  # type: ignore[attr-defined]
    assert [q.name for q in await app.queues()] == ["email"]  # refused: nothing written
    ok(await run(cli, "queue", "pause", *url, "newsletters", "--create"))
    paused = {q.name: q.paused for q in await app.queues()}
    assert paused == {"email": False, "newsletters": True}
    ok(await run(cli, "queue", "resume", *url, "newsletters"))  # known now: its setting


async def test_task_commands(cli: Cli, app: skiplock.App) -> None:
    ok(await run(cli, "task", "pause", APP, "record", "--for", "60"))
    assert [p.task for p in await app.task_pauses()] == ["record"]
    assert "resumed" in ok(await run(cli, "task", "resume", APP, "record"))
    unknown = await run(cli, "task", "pause", APP, "nope")
    assert unknown.returncode == 1 and "no task is registered" in unknown.stderr  # type: ignore[attr-defined]


async def test_job_and_dead_letter_commands(cli: Cli, app: skiplock.App) -> None:
    doomed = [await cli_app.fail.aenqueue(f"kaput {n}") for n in range(3)]
    other = await cli_app.fail.aenqueue("different")
    await Worker(app, poll_interval_s=0.05).run(burst=True)
    # Enqueued after the burst, an hour ahead: still pending when the CLI is asked to retry it.
    pending = await cli_app.record.using(run_after=timedelta(hours=1)).aenqueue(2)
    assert "kaput 0" in ok(await run(cli, "job", "show", APP, str(doomed[0].id)))
    listing = ok(await run(cli, "dead", "list", APP, "--error", "kaput"))
    assert "3 dead jobs" in listing
    requeued = ok(await run(cli, "dead", "requeue", APP, "--error", "kaput", "--who", "alice"))
    assert "requeued 3 jobs" in requeued
    job = await doomed[0].fetch()
    assert (job.state, job.attempt) == (JobState.PENDING, 0)
    assert job.audit[-1]["who"] == "alice" and job.audit[-1]["what"] == "requeue"
    assert "discarded 1 jobs" in ok(await run(cli, "dead", "discard", APP, str(other.id)))
    assert (await other.fetch()).state is JobState.CANCELLED
    nothing = await run(cli, "dead", "requeue", APP)
    assert nothing.returncode == 2  # a filter or ids are required
    cancelled = ok(await run(cli, "job", "cancel", APP, str(doomed[1].id)))
    assert "cancelled" in cancelled
    assert (await doomed[1].fetch()).state is JobState.CANCELLED
    retried = ok(await run(cli, "job", "retry", APP, str(doomed[1].id)))
    assert "requeued" in retried
    assert (await doomed[1].fetch()).state is JobState.PENDING
    assert (await pending.fetch()).state is JobState.PENDING
    not_final = await run(cli, "job", "retry", APP, str(pending.id))
    assert not_final.returncode == 1
    assert f"job {pending.id} is pending, not finished" in not_final.stderr  # type: ignore[attr-defined]
    assert (await pending.fetch()).audit == []  # refused: nothing was done to it
    missing = await run(cli, "job", "show", APP, "999999")
    assert missing.returncode == 1 and "no job with id 999999" in missing.stderr  # type: ignore[attr-defined]


async def test_dead_requeue_and_discard_act_on_at_most_their_limit(
    cli: Cli, app: skiplock.App
) -> None:
    """150 dead jobs: ``--limit 10`` requeues the 10 oldest (the ones ``dead list --limit 10``
    shows) and says how many more match; ``discard --limit 5`` the next 5; ``dead list``
    says when it shows fewer than match; the App's own calls keep the limit too."""
    ids = await bury_many(await app.backend(), "fail", [f"kaput {n}" for n in range(150)])
    listing = ok(await run(cli, "dead", "list", APP, "--task", "fail"))
    assert "showing 100 of 150 dead jobs; --limit to see more" in listing
    preview = ok(await run(cli, "dead", "list", APP, "--task", "fail", "--limit", "10"))
    assert [int(line.split()[0]) for line in preview.splitlines()[:-1]] == ids[:10]
    requeued = ok(await run(cli, "dead", "requeue", APP, "--task", "fail", "--limit", "10"))
    assert f"requeued 10 jobs: {ids[:10]}; 140 more match" in requeued
    discarded = ok(await run(cli, "dead", "discard", APP, "--task", "fail", "--limit", "5"))
    assert f"discarded 5 jobs: {ids[10:15]}; 135 more match" in discarded
    assert await app.requeue_dead(skiplock.JobFilter(task="fail", limit=5)) == ids[15:20]
    assert await app.discard_dead(skiplock.JobFilter(task="fail", limit=5)) == ids[20:25]
    assert await app.count_jobs(JobState.DEAD, skiplock.JobFilter(task="fail")) == 125
    assert await app.count_jobs(JobState.PENDING) == 15
    assert "125 dead jobs" in ok(await run(cli, "dead", "list", APP, "--limit", "200"))
    named = [str(i) for i in ids[25:145]]  # 120 ids: the limit defaults to as many
    assert "discarded 120 jobs" in ok(await run(cli, "dead", "discard", APP, *named))
    five = [str(i) for i in ids[145:]]  # named, but past the limit: left, not "missing"
    requeued = ok(await run(cli, "dead", "requeue", APP, *five, "--limit", "2"))
    assert f"requeued 2 jobs: {ids[145:147]}; 3 more match" in requeued


async def test_dead_requeue_says_which_jobs_a_unique_key_kept_dead(
    cli: Cli, app: skiplock.App
) -> None:
    keyed = await cli_app.fail.using(unique_key="invoice-7").aenqueue("kaput")
    free = await cli_app.fail.aenqueue("kaput too")
    await Worker(app, poll_interval_s=0.05).run(burst=True)
    holder = cli_app.fail.using(unique_key="invoice-7", run_after=timedelta(hours=1))
    await holder.aenqueue("the live one")
    result = await run(cli, "dead", "requeue", APP, "--task", "fail")
    assert result.returncode == 1, result.stderr  # type: ignore[attr-defined]
    assert f"requeued 1 jobs: [{free.id}]" in result.stdout  # type: ignore[attr-defined]
    assert (
        f"skipped 1 jobs, a live job holds their unique key: [{keyed.id}]" in result.stderr  # type: ignore[attr-defined]
    )
    assert (await keyed.fetch()).state is JobState.DEAD


async def test_operations_take_a_url_instead_of_the_app(cli: Cli, app: skiplock.App) -> None:
    assert "no queues" in ok(await run(cli, "queue", "list", "--url", cli.url))
    idle = ok(await run(cli, "queue", "list", APP))  # the app's tasks name "default"
    assert "default" in idle and "pending=0" in idle
    dead = await cli_app.fail.aenqueue("kaput")
    await cli_app.record.using(queue="other").aenqueue(1)
    await Worker(app, poll_interval_s=0.05, queues=("default",)).run(burst=True)
    listing = ok(await run(cli, "queue", "list", "--url", cli.url))
    assert "other" in listing and "pending=1" in listing
    ok(await run(cli, "queue", "pause", "--url", cli.url, "other"))
    assert "paused=yes" in ok(await run(cli, "queue", "list", "--url", cli.url))
    shown = ok(await run(cli, "job", "show", "--url", cli.url, str(dead.id)))
    assert "kaput" in shown and '"started_at"' in shown
    jobs = ok(await run(cli, "job", "list", "--url", cli.url, "--state", "dead", "--task", "fail"))
    assert f"{dead.id:>8} dead" in jobs and "1 jobs" in jobs
    by_queue = ok(await run(cli, "job", "list", APP, "--queue", "other"))
    assert "record queue=other" in by_queue and "1 jobs" in by_queue
    assert "0 jobs" in ok(await run(cli, "job", "list", APP, "--queue", "default", "--task", "x"))


async def test_cancelling_a_running_job_says_what_will_really_happen(
    cli: Cli, app: skiplock.App
) -> None:
    """The job's worker is gone (claimed, never heartbeated): the flag reaches no worker, so
    the CLI says the job is cancelled when its lease expires, and when that is."""
    handle = await cli_app.record.aenqueue(1)
    backend = await app.backend()
    params = ClaimParams(None, 1, "gone", "gone:1", 600.0, 0.0)
    (claimed,) = await backend.job_get_available(params)
    said = ok(await run(cli, "job", "cancel", APP, str(handle.id)))
    expires = claimed.lease_expires_at.astimezone(UTC).isoformat(timespec="seconds")
    assert "flagged" in said and f"its lease expires at {expires}" in said, said
    assert "or by its worker" in said, said
