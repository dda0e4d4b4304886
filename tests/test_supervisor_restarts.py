"""What a ``--processes`` supervisor says of its children's exits, and what the registry and
``skiplock health`` make of its restarts: real CLI processes and real signals, on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time

import skiplock

from .apps import dead_worker_app
from .helpers import Cli, cli_fixtures

APP = "tests.apps.dead_worker_app:app"
FAST = ("--maintenance-interval", "0.3")

cli, app = cli_fixtures(dead_worker_app, APP)


async def test_a_child_stopped_on_its_own_is_a_clean_stop_not_an_error(
    cli: Cli, app: skiplock.App
) -> None:
    """SIGTERM sent to one child, not to the supervisor: it drains and exits 0. That is no
    crash: logged as a clean stop, not ``ERROR ... exited with 0``, and another takes its
    place without counting a restart."""
    supervisor = cli.start(*FAST, "--processes", "2")
    await asyncio.to_thread(cli.wait_for_output, 0, "supervisor started 2 workers")
    first, second = map(int, re.findall(r"\d+", cli.output().split("workers: ")[1])[:2])
    for pid in (first, second):
        await asyncio.to_thread(cli.wait_for_output, 0, f"worker {pid} ready")
    os.kill(first, signal.SIGTERM)
    said = f"INFO skiplock.supervisor [{supervisor.pid}] worker {first} stopped cleanly"
    deadline = time.monotonic() + 30
    while said not in cli.output():
        assert time.monotonic() < deadline, cli.output()
        await asyncio.sleep(0.05)
    await asyncio.to_thread(cli.wait_for_output, 0, "restarted a worker as")
    assert "exited with 0" not in cli.output() and " ERROR " not in cli.output()
    supervisor.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(supervisor.wait, 30) == 0, cli.output()


async def test_a_crash_loop_shows_in_workers_and_turns_health_red(
    cli: Cli, app: skiplock.App
) -> None:
    """A job that kills its worker on each of its three attempts: the supervisor restarts a
    worker three times in a row (1 s, 2 s, 4 s). Health used to read every restarted worker's
    fresh row as green; now the third restart in a row is a crash loop, said by name."""
    await dead_worker_app.crash.aenqueue()
    supervisor = cli.start(*FAST, "--processes", "2")

    def health() -> tuple[int, str]:
        answer = cli.run("health", APP)
        return answer.returncode, answer.stderr

    deadline = time.monotonic() + 90
    while "restarted 3 times in a row" not in (verdict := await asyncio.to_thread(health))[1]:
        assert time.monotonic() < deadline, f"{verdict}\n{cli.output()}"
        await asyncio.sleep(0.2)
    code, said = verdict
    assert code == 1 and said.startswith("unhealthy: worker "), said
    assert "a crash loop" in said and "healthy again once one stays up 60s" in said
    assert sum(ln.startswith("crash") for ln in cli.lines()) == 3
    listing = json.loads(cli.run("workers", APP, "--json").stdout)
    rows = sorted((w["restarts"], w["restarts_in_a_row"], w["live"]) for w in listing["workers"])
    assert rows[-1] == (3, 3, True), rows  # the last one restarted (others may be due)
    lines = cli.run("workers", APP).stdout.splitlines()
    assert sum("restarts=3 (3 in a row)" in line for line in lines) == 1, lines
    assert cli.run("health", APP, "--max-restarts", "0").returncode == 0  # a looser probe
    out = cli.output()
    for n, delay in ((1, 1), (2, 2), (3, 4)):
        assert f"exited with code 7; restarting it in {delay}s (restart {n} in a row)" in out
    supervisor.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(supervisor.wait, 30) == 0, cli.output()
