"""A ``--processes`` supervisor killed with SIGKILL leaves no orphans: its children see it gone
(``_worker/lifeline.py``) and stop as on SIGTERM, giving their jobs back. Real CLI processes
and real signals, on SQLite and PostgreSQL; Linux's /proc tells which processes live."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import skiplock
from skiplock import JobState

from .apps import dead_worker_app
from .helpers import Cli, await_until, cli_fixtures

APP = "tests.apps.dead_worker_app:app"
FAST = ("--maintenance-interval", "0.3")

cli, app = cli_fixtures(dead_worker_app, APP)


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie nobody reaped has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
            found.add(int(entry.name))
    return found


async def until_gone(pids: set[int], cli: Cli, timeout: float = 30.0) -> None:
    """Until none of ``pids`` runs (polled, within ``timeout``)."""
    deadline = time.monotonic() + timeout
    while alive := {p for p in pids if running(p)}:
        assert time.monotonic() < deadline, f"orphans still running: {alive}\n{cli.output()}"
        await asyncio.sleep(0.05)


async def test_children_of_a_killed_supervisor_stop_and_give_their_jobs_back(
    cli: Cli, app: skiplock.App
) -> None:
    handles = [await dead_worker_app.long.aenqueue(n, 300.0) for n in range(4)]
    supervisor = cli.start(
        *FAST, "--processes", "2", "--concurrency", "2", "--shutdown-timeout", "1"
    )
    await await_until(
        lambda: sum(ln.startswith("start") for ln in cli.lines()) >= 4, "four starts", 60
    )
    children = {int(ln.split()[2]) for ln in cli.lines()}
    assert len(children) == 2
    supervisor.send_signal(signal.SIGKILL)  # a process manager escalating, the OOM killer
    await asyncio.to_thread(supervisor.wait)
    await until_gone(children, cli)
    assert cli.output().count(f"the supervisor (pid {supervisor.pid}) is gone") == 2
    for handle in handles:  # given back at the end of the shutdown timeout, not stranded
        job = await handle.fetch()
        assert (job.state, job.lease_expires_at) == (JobState.PENDING, None), job
    assert not any(w.pid in children for w in await app.workers())  # each left the registry
    assert sum(ln.startswith("start") for ln in cli.lines()) == 4  # and claimed nothing more


async def test_children_whose_supervisor_died_as_they_started_claim_nothing(
    cli: Cli, app: skiplock.App
) -> None:
    """The race: the supervisor dies before its children look. The lifeline's end-of-file
    stays, so each child reads it when it starts watching, and stops before its first
    claim."""
    handles = [await dead_worker_app.long.aenqueue(n, 300.0) for n in range(2)]
    supervisor = cli.start(*FAST, "--processes", "2")
    deadline = time.monotonic() + 30
    while len(children := children_of(supervisor.pid)) < 2:
        assert time.monotonic() < deadline, cli.output()
        await asyncio.sleep(0.001)
    os.kill(supervisor.pid, signal.SIGKILL)  # before the children imported anything
    await asyncio.to_thread(supervisor.wait)
    await until_gone(children, cli)
    assert not any(ln.startswith("start") for ln in cli.lines()), cli.output()
    assert [(await h.fetch()).state for h in handles] == [JobState.PENDING] * 2
    assert await app.workers() == []
