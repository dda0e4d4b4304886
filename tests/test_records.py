"""Job records for people: ``skiplock job show`` (and ``--json``) shows the result, when the
attempt started and finished, which worker ran it, each attempt's error, and progress."""

from __future__ import annotations

import json

import skiplock
from skiplock import Worker

from .apps import cli_app
from .helpers import APP, Cli, cli_fixtures, ok, run

cli, app = cli_fixtures(cli_app)


async def test_job_show_json_has_result_times_worker_and_errors(
    cli: Cli, app: skiplock.App
) -> None:
    done = await cli_app.add.aenqueue(20, 22)
    dead = await cli_app.fail.aenqueue("no luck")
    await Worker(app, poll_interval_s=0.05).run(burst=True)
    shown = json.loads(ok(await run(cli, "job", "show", APP, str(done.id), "--json")))
    assert shown["id"] == done.id and shown["state"] == "succeeded"
    assert shown["result"] == {"sum": 42}
    assert shown["started_at"] <= shown["finished_at"]
    assert shown["worker"] == (await done.fetch()).worker is not None
    assert shown["progress"] is None
    failed = json.loads(ok(await run(cli, "job", "show", APP, str(dead.id), "--json")))
    assert failed["state"] == "dead" and failed["result"] is None
    assert [e["attempt"] for e in failed["errors"]] == [1]
    assert "ValueError: no luck" in failed["errors"][0]["message"]
    text = ok(await run(cli, "job", "show", APP, str(done.id)))
    assert '"result": {' in text and '"worker":' in text and '"started_at":' in text
