"""``skiplock workers``, ``task list`` and ``prune`` through the real CLI, on SQLite and
PostgreSQL: a real worker process in the registry, the app's real tasks, real rows pruned."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys

import pytest

import skiplock
from skiplock import JobState, Worker

from .apps import cli_app
from .helpers import ROOT, Cli, cli_fixtures, documented, keys, parsed, run

pytestmark = pytest.mark.slow
APP = "tests.apps.cli_app:app"
KEYS_APP = "tests.apps.keys_app:app"

cli, app = cli_fixtures(cli_app)


async def test_workers_lists_a_live_worker_process(cli: Cli, app: skiplock.App) -> None:
    proc = cli.start("--queues", "default,other", "--concurrency", "3")
    await asyncio.to_thread(cli.wait_for_output, 0, "ready: every service started")
    value = parsed(await run(cli, "workers", "--url", cli.url, "--json"))
    assert keys(value) == documented("`workers --json`")
    (worker,) = value["workers"]
    assert (worker["host"], worker["pid"], worker["queues"], worker["concurrency"]) == (
        socket.gethostname(),
        proc.pid,
        ["default", "other"],
        3,
    )
    assert worker["live"] is True and worker["running"] == 0 and value["live"] == 1
    text = await run(cli, "workers", APP)
    (line, total) = text.stdout.splitlines()  # type: ignore[attr-defined]
    # named host:pid by default: said once, not as its address and again as its name
    assert line.startswith(f"{socket.gethostname()}:{proc.pid} queues=default,other "), line
    assert "concurrency=3 running=0" in line and total == "1 live worker"

    os.killpg(proc.pid, signal.SIGKILL)  # gone without a word: its row stays, silent
    await asyncio.to_thread(proc.wait)
    silent = parsed(await run(cli, "workers", APP, "--json", "--max-silence", "0"))
    assert (silent["live"], silent["silent"], silent["workers"]) == (0, 1, [])
    shown = parsed(await run(cli, "workers", APP, "--json", "--max-silence", "0", "--all"))
    assert [(w["pid"], w["live"]) for w in shown["workers"]] == [(proc.pid, False)]
    text = await run(cli, "workers", APP, "--max-silence", "0")
    assert text.stdout.splitlines() == ["0 live workers (1 silent or dead: --all)"]  # type: ignore[attr-defined]


def task_list(app_spec: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "SKIPLOCK_DATABASE_URL": "sqlite:///unused"}
    return subprocess.run(
        [sys.executable, "-m", "skiplock", "task", "list", app_spec, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_task_list_shows_each_registered_task_and_its_options() -> None:
    value = parsed(task_list(APP, "--json"))
    assert keys(value) == documented("`task list --json`")
    tasks = {t["name"]: t for t in value["tasks"]}
    assert sorted(tasks) == sorted(cli_app.app.tasks)
    assert tasks["fail"]["max_attempts"] == 1
    assert tasks["flaky"]["retry"] == {"base_s": 0.05, "cap_s": 600.0, "jitter": False}
    assert tasks["add_sync"]["is_async"] is False and tasks["add"]["is_async"] is True
    ticks = parsed(task_list("tests.apps.cron_app:app", "--json"))["tasks"]
    assert [(t["name"], t["schedules"]) for t in ticks] == [("tick", ["tick"])]
    text = task_list(APP).stdout
    assert "flaky queue=default priority=0 max_attempts=2 timeout=none retry=0.05s..600s\n" in text
    assert text.endswith(f"{len(tasks)} tasks\n")
    assert not (ROOT / "unused").exists()  # the database is never opened


def test_task_list_shows_every_key_option_a_task_carries() -> None:
    """Concurrency key, cap, weight, fairness, ordering key, unique key and what a conflict
    does: in the text and in --json, keys given as functions named as such."""
    tasks = {t["name"]: t for t in parsed(task_list(KEYS_APP, "--json"))["tasks"]}
    function = "(a function of the arguments)"
    sync = tasks["sync_account"]
    assert (sync["concurrency_key"], sync["key_limit"], sync["key_weight"], sync["fair"]) == (
        function,
        2,
        3,
        True,
    )
    assert (sync["unique_key"], sync["on_conflict"]) == (function, "replace")
    assert (tasks["bulk_import"]["concurrency_key"], tasks["bulk_import"]["fair"]) == (
        "imports",
        False,
    )
    ledger, reindex = tasks["ledger_entry"], tasks["reindex"]
    assert (ledger["ordering_key"], ledger["ordering_on_dead"]) == (function, "block")
    assert (reindex["ordering_key"], reindex["ordering_on_dead"]) == ("index", "skip")
    assert reindex["debounce_s"] == 2.0 and tasks["welcome"]["version"] == 2
    assert tasks["ledger_entry"]["concurrency_key"] is None
    assert tasks["ledger_entry"]["ordering_on_dead"] == "block"
    lines = {line.split()[0]: line for line in task_list(KEYS_APP).stdout.splitlines()}
    assert lines["sync_account"].endswith(
        f" concurrency_key={function} key_limit=2 key_weight=3"
        f" unique_key={function} (live) on_conflict=replace"
    )
    assert lines["bulk_import"].endswith(" concurrency_key=imports fair=no")
    assert lines["ledger_entry"].endswith(f" ordering_key={function} ordering_on_dead=block")
    assert lines["reindex"].endswith(" ordering_key=index ordering_on_dead=skip debounce=2s")
    assert lines["welcome"].endswith(
        " unique_key=welcome (live_or_succeeded) unique_scope=shared version=2"
    )
    assert tasks["welcome"]["unique_scope"] == "shared"
    assert tasks["sync_account"]["unique_scope"] == "task"


async def test_prune_dry_run_counts_exactly_what_the_real_run_deletes(
    cli: Cli, app: skiplock.App
) -> None:
    done = [await cli_app.add.aenqueue(n, 1) for n in range(3)]
    doomed = await cli_app.fail.aenqueue("kaput")
    await Worker(app, poll_interval_s=0.05).run(burst=True)
    waiting = await cli_app.record.aenqueue(9)  # pending: never pruned
    ages = ("--finished-age", "0", "--dead-age", "3600")  # finished ones go, dead ones stay

    dry = parsed(await run(cli, "prune", "--url", cli.url, *ages, "--dry-run", "--json"))
    assert keys(dry) == documented("`prune --json`")
    assert (dry["dry_run"], dry["jobs"], dry["by_state"]) == (True, 3, {"succeeded": 3})
    text = await run(cli, "prune", APP, *ages, "--dry-run")
    assert text.stdout == (  # type: ignore[attr-defined]
        "would delete 3 jobs (succeeded or cancelled more than 0 seconds ago, "
        "dead more than 1 hour ago): succeeded=3; "
        "0 audit trail entries (written more than 90 days ago)\n"
    )
    assert len(await app.list_jobs()) == 5  # a dry run deletes nothing

    real = parsed(await run(cli, "prune", APP, *ages, "--json"))
    assert (real["dry_run"], real["jobs"], real["by_state"]) == (False, 3, None)
    left = {j.id: j.state for j in await app.list_jobs()}
    assert left == {waiting.id: JobState.PENDING, doomed.id: JobState.DEAD}
    assert not set(left) & {h.id for h in done}
    after = await run(cli, "prune", APP, "--finished-age", "0", "--dead-age", "0")
    assert after.stdout.startswith("deleted 1 jobs")  # type: ignore[attr-defined]
    assert {j.id for j in await app.list_jobs()} == {waiting.id}
    bad = await run(cli, "prune", APP, "--dead-age", "nan")
    assert bad.returncode == 2 and "--dead-age" in bad.stderr  # type: ignore[attr-defined]


def test_prune_defaults_are_the_workers_retention_in_words() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "skiplock", "prune", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "[default: (7 days)]" in out and "[default: (30 days)]" in out
    assert "[default: (90 days)]" in out
