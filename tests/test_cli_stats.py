"""``skiplock stats``: the real CLI in a subprocess (JSON keys are StatsGroup's fields, the
numbers are app.stats()'s), the tables' alert colours, and ``--watch`` ended by Ctrl-C."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import skiplock
from skiplock import StatsGroup
from skiplock._backends.params import ClaimParams
from skiplock._cli.stats_tables import NOW_COLUMNS, WINDOW_COLUMNS, Alerts, table
from skiplock._job import Completion, Disposition

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def skiplock_cli(url: str, *args: str, **popen: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "skiplock", *args, "--url", url]
    return subprocess.Popen(command, env=env, cwd=ROOT, text=True, **popen)  # type: ignore[call-overload]


def run(url: str, *args: str) -> tuple[int, str, str]:
    proc = skiplock_cli(url, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


async def a_history(app: skiplock.App) -> None:
    """Two ready jobs in queue q (task t), one dead job of task u in queue q."""

    @app.task(name="t", queue="q")
    def t() -> None: ...

    @app.task(name="u", queue="q", max_attempts=1)
    def u() -> None: ...

    await u.aenqueue()
    backend = await app.backend()
    (c,) = await backend.job_get_available(ClaimParams(("q",), 1, "w", "tok", 60.0, 5.0))
    await backend.job_set_state_if_running_many(
        [Completion(c.id, c.lease_token, Disposition.DEAD, run_s=0.25)]
    )
    await t.aenqueue()
    await t.aenqueue()


async def test_json_has_every_number_under_its_field_name(app: skiplock.App) -> None:
    await a_history(app)
    code, out, err = run(app.url, "stats", "--json", "--window", "600")
    assert code == 0, err
    reading = json.loads(out)
    fields = [f.name for f in dataclasses.fields(StatsGroup)]
    assert list(reading["total"]) == fields
    assert reading["window_s"] == 600
    assert datetime.fromisoformat(reading["at"]).tzinfo is not None
    total = reading["total"]
    assert (total["ready"], total["dead"], total["attempts_1"], total["failed"]) == (2, 1, 1, 1)
    assert total["dead_rate_per_min"] == pytest.approx(0.1)
    assert total["run_duration_p50_s"] == 0.25 and total["backlog_age_s"] > 0
    assert [q["name"] for q in reading["queues"]] == ["q"]
    assert [t["name"] for t in reading["tasks"]] == ["t", "u"]
    code, out, _ = run(app.url, "stats", "--json", "--task", "u")
    assert code == 0 and [t["name"] for t in json.loads(out)["tasks"]] == ["u"]


def run_at_width(url: str, columns: str | None, *args: str) -> str:
    """``skiplock stats`` piped (not a terminal), with $COLUMNS set to ``columns`` or unset."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env |= {"PYTHONPATH": str(ROOT)} | ({"COLUMNS": columns} if columns else {})
    done = subprocess.run(
        [sys.executable, "-m", "skiplock", "stats", *args, "--url", url],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_the_tables_show_each_group(app: skiplock.App) -> None:
    await a_history(app)
    out = run_at_width(app.url, "200", "--queue", "q")
    for title in ("queues now", "queues, last 5.0m", "tasks now", "tasks, last 5.0m"):
        assert title in out
    assert "(all)" in out and " t " in out and " u " in out
    assert "┃ scheduled ┃" in out  # wide enough: the tables, headers whole


@pytest.mark.parametrize("columns", ["80", None])
async def test_stats_fit_80_columns_and_a_pipe(app: skiplock.App, columns: str | None) -> None:
    """At 80 columns (or piped with no $COLUMNS) the tables would fold every header and name;
    the narrow listing keeps each whole and no line past 80."""

    @app.task(name="myapp.tasks.synchronise_crm_contacts", queue="email-notifications-eu")
    def long_named() -> None: ...

    await a_history(app)
    await long_named.aenqueue()
    out = run_at_width(app.url, columns)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    assert "myapp.tasks.synchronise_crm_contacts" in lines  # a name on a line, whole
    assert "email-notifications-eu" in lines
    assert "  pending 1  ready 1  scheduled 0  retrying 0  claimed 0  running 0  waiting 0" in lines
    assert any("claim p50/p95/max" in line and "dead 1" in out for line in lines)
    for title in ("queues now", "queues, last 5.0m", "tasks now", "tasks, last 5.0m"):
        assert title in lines


async def test_bad_options_are_one_line_errors(app: skiplock.App) -> None:
    code, _, err = run(app.url, "stats", "--window", "0")
    assert code != 0 and "window_s=0.0" in err and "Traceback" not in err
    code, _, err = run(app.url, "stats", "--queue", "")
    assert code != 0 and "queue=''" in err and "Traceback" not in err


async def test_watch_refreshes_until_ctrl_c(app: skiplock.App) -> None:
    await a_history(app)
    proc = skiplock_cli(
        app.url, "stats", "--json", "--watch", "0.5", stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    first, second = proc.stdout.readline(), proc.stdout.readline()  # two refreshes
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(first)["at"] < json.loads(second)["at"]


def group(**numbers: object) -> StatsGroup:
    zero = {f.name: 0 for f in dataclasses.fields(StatsGroup)} | {"name": "q"}
    return StatsGroup(**(zero | numbers))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("numbers", "red"),
    [
        ({}, set()),
        ({"backlog_age_s": 299.0}, set()),
        ({"backlog_age_s": 301.0}, {"backlog age"}),
        ({"dead": 1}, {"dead"}),
        ({"reclaims": 2}, {"reclaims"}),
    ],
)
def test_a_number_past_its_alert_threshold_is_red(
    numbers: dict[str, object], red: set[str]
) -> None:
    g = group(**numbers)
    shown = table("t", [g], NOW_COLUMNS, Alerts(300.0)).columns
    shown += table("t", [g], WINDOW_COLUMNS, Alerts(300.0)).columns
    styled = {c.header for c in shown if any(getattr(cell, "style", "") for cell in c._cells)}
    assert styled - {"name"} == red


def test_stats_as_dict_is_json(tmp_path: Path) -> None:
    reading = skiplock.Stats(datetime(2026, 1, 1, tzinfo=UTC), 60.0, group(name=""), (), ())
    assert json.loads(json.dumps(reading.as_dict()))["at"] == "2026-01-01T00:00:00+00:00"


async def test_the_busiest_concurrency_keys_in_the_tables_the_listing_and_json(
    app: skiplock.App,
) -> None:
    @app.task(name="sync", queue="q", concurrency_key=lambda n: f"acct-{n % 3}", key_limit=1)
    def sync(n: int) -> None: ...

    await app.enqueue_many([sync.prepare(n) for n in range(7)])
    backend = await app.backend()
    taken = await backend.job_get_available_keyed(ClaimParams(None, 10, "w", "tok", 60.0, 5.0))
    assert len(taken) == 3  # one of each key: each at its limit now
    code, out, err = run(app.url, "stats", "--json")
    assert code == 0, err
    keys = json.loads(out)["keys"]
    assert keys[0] == {
        "key": "acct-0",
        "running": 1,
        "ready": 2,
        "pending": 2,
        "key_limit": 1,
        "database": "default",
    }
    assert [k["key"] for k in keys] == ["acct-0", "acct-1", "acct-2"]
    wide = run_at_width(app.url, "200")
    assert "busiest concurrency keys now" in wide and "acct-2" in wide
    narrow = run_at_width(app.url, "80").splitlines()
    assert narrow[narrow.index("acct-0") + 1] == "  running 1  ready 2  pending 2  limit 1"
