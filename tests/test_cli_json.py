"""``--json`` on every command that lists or shows, through the real CLI on SQLite and
PostgreSQL: the output parses, and its keys are exactly the ones docs/operations/cli.md lists
for that command (so the documented schema cannot drift from what scripts read)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import skiplock
from skiplock import Worker

from .apps import cli_app
from .helpers import Cli, cli_fixtures, documented, keys, parsed, run

pytestmark = pytest.mark.slow
APP = "tests.apps.cli_app:app"
CRON_APP = "tests.apps.cron_app:app"

cli, app = cli_fixtures(cli_app)


JOB = documented("A job")


async def test_job_list_show_and_dead_list_print_the_documented_keys(
    cli: Cli, app: skiplock.App
) -> None:
    assert "state" in JOB and "audit" in JOB  # the docs table was found
    doomed = await cli_app.fail.aenqueue("kaput")
    await Worker(app, poll_interval_s=0.05).run(burst=True)
    waiting = await cli_app.record.aenqueue(1)

    listing = parsed(await run(cli, "job", "list", "--url", cli.url, "--json"))
    assert keys(listing) == documented("`job list --json`")
    assert listing["count"] == 2 and [j["id"] for j in listing["jobs"]] == [waiting.id, doomed.id]
    assert all(set(j) == JOB for j in listing["jobs"])
    shown = parsed(await run(cli, "job", "show", APP, str(doomed.id), "--json"))
    assert set(shown) == JOB | {"workflow", "logs"} and shown["state"] == "dead"
    assert "kaput" in shown["errors"][-1]["message"]
    datetime.fromisoformat(shown["finished_at"])  # a time is an ISO 8601 string
    dead = parsed(await run(cli, "dead", "list", APP, "--json"))
    assert keys(dead) == documented("`job list --json`")
    assert [j["id"] for j in dead["jobs"]] == [doomed.id]


async def test_job_list_takes_the_dead_lists_filters(cli: Cli, app: skiplock.App) -> None:
    doomed = await cli_app.fail.aenqueue("kaput")
    other = await cli_app.fail.aenqueue("different")
    await Worker(app, poll_interval_s=0.05).run(burst=True)
    waiting = await cli_app.record.aenqueue(1)

    async def ids(*args: str) -> list[int]:
        value = parsed(await run(cli, "job", "list", APP, "--json", *args))
        return [j["id"] for j in value["jobs"]]

    assert await ids("--error", "KAPUT") == [doomed.id]
    ahead = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    behind = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert await ids("--since", ahead) == []
    assert await ids("--since", behind) == [waiting.id, other.id, doomed.id]
    assert await ids("--until", ahead, "--error", "different") == [other.id]
    assert await ids("--until", behind) == []
    text = await run(cli, "job", "list", APP, "--error", "kaput")
    assert "1 jobs" in text.stdout  # type: ignore[attr-defined]
    bad = await run(cli, "job", "list", APP, "--since", "yesterday")
    assert bad.returncode == 2 and "--since" in bad.stderr  # type: ignore[attr-defined]
    # a window that ends before it starts is a mistake, not "no jobs"
    for verb in (("job", "list"), ("dead", "list")):
        empty = await run(cli, *verb, APP, "--since", ahead, "--until", behind)
        assert empty.returncode == 2, (verb, empty.stdout)  # type: ignore[attr-defined]
        start, end = ahead.replace("T", " "), behind.replace("T", " ")
        assert empty.stderr.splitlines() == [  # type: ignore[attr-defined]
            f"Error: --until {end} is not after --since {start}"
        ]


async def test_queue_list_json_is_each_queue_with_its_counts(cli: Cli, app: skiplock.App) -> None:
    await cli_app.record.aenqueue(1)
    await cli_app.record.aenqueue(2)
    assert (await run(cli, "queue", "pause", "--url", cli.url, "idle", "--create")).returncode == 0  # type: ignore[attr-defined]
    value = parsed(await run(cli, "queue", "list", "--url", cli.url, "--json"))
    assert keys(value) == documented("`queue list --json`")
    queues = {q["name"]: q for q in value["queues"]}
    record_queue = cli_app.record.queue
    assert queues[record_queue]["pending"] == 2 and queues[record_queue]["paused"] is False
    assert queues["idle"]["paused"] is True and queues["idle"]["pending"] == 0
    assert [q["name"] for q in value["queues"]] == sorted(queues)


async def test_cron_list_json_is_each_schedule(cli: Cli) -> None:
    assert (await run(cli, "migrate", CRON_APP)).returncode == 0  # type: ignore[attr-defined]
    value = parsed(await run(cli, "cron", "list", CRON_APP, "--json"))
    assert keys(value) == documented("`cron list --json`")
    (tick,) = value["schedules"]
    assert (tick["id"], tick["cron"], tick["zone"], tick["last_slot"]) == (
        "tick",
        "* * * * * *",
        "UTC",
        None,
    )
    fires = [datetime.fromisoformat(f) for f in tick["next_fires"]]
    assert len(fires) == 3 and fires == sorted(fires)


async def test_health_json_says_why_with_the_same_exit_code(cli: Cli, app: skiplock.App) -> None:
    await cli_app.record.aenqueue(1)
    value = parsed(await run(cli, "health", "--url", cli.url, "--json"), code=1)
    assert keys(value) == documented("`health --json`")
    assert value["healthy"] is False and value["workers_beating"] == 0 and value["ready"] == 1
    assert "no worker has heartbeated" in value["problems"][0]
