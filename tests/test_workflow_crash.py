"""Workflows across crashes, with real worker processes and real signals on SQLite and
PostgreSQL: a chord's callback fires exactly once when its worker is SIGKILLed between a
member's completion and the callback's release; a durable step's function runs once across
a SIGKILL after it returned; a parked job outlives its worker and resumes once on a signal."""

from __future__ import annotations

import signal

import pytest

import skiplock
from skiplock import JobState, SignalOutcome, chord

from .apps import workflow_app
from .helpers import Cli, await_until, await_until_async, cli_fixtures

APP = "tests.apps.workflow_app:app"
FAST = ("--maintenance-interval", "0.2")
pytestmark = pytest.mark.slow

cli, app = cli_fixtures(workflow_app, APP)


async def test_a_chord_calls_back_once_when_its_worker_dies_before_the_release(
    cli: Cli, app: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = chord([workflow_app.member.s(n) for n in range(5)], workflow_app.callback.s())
    handle = await flow.aenqueue()
    monkeypatch.setenv("SKIPLOCK_TEST_KILL_AFTER_COMPLETION", "1")
    doomed = cli.start(*FAST)
    await await_until(lambda: doomed.poll() is not None, "the worker to kill itself", 30)
    assert doomed.returncode == -signal.SIGKILL
    assert any(ln.startswith("killed") for ln in cli.lines())
    monkeypatch.delenv("SKIPLOCK_TEST_KILL_AFTER_COMPLETION")
    healthy = cli.start(*FAST)
    assert await handle.result(timeout=60) == 10
    healthy.send_signal(signal.SIGTERM)
    assert healthy.wait(30) == 0
    callbacks = [ln for ln in cli.lines() if ln.startswith("callback")]
    assert [ln.split()[1] for ln in callbacks] == ["10"], cli.lines()
    assert await app.count_jobs(JobState.WAITING) == 0


async def test_a_step_runs_once_across_a_sigkill_after_it_returned(
    cli: Cli, app: skiplock.App
) -> None:
    handle = await workflow_app.charge_then_crash.aenqueue(42)
    worker = cli.start(*FAST)
    await await_until(lambda: any(ln.startswith("crash") for ln in cli.lines()), "the crash", 30)
    await await_until(lambda: worker.poll() is not None, "the worker to die", 30)
    second = cli.start(*FAST)
    assert await handle.result(timeout=60) == "receipt-42"
    second.send_signal(signal.SIGTERM)
    assert second.wait(30) == 0
    assert [ln.split()[0] for ln in cli.lines()] == ["charged", "crash", "shipped"]
    assert (await app.get_job(handle.id)).attempt == 2


async def test_a_parked_job_outlives_its_worker_and_resumes_once(
    cli: Cli, app: skiplock.App
) -> None:
    handle = await workflow_app.approval.aenqueue()
    first = cli.start(*FAST)

    async def parked() -> bool:
        return (await app.get_job(handle.id)).state is JobState.WAITING

    await await_until_async(parked, "the job to park")
    first.send_signal(signal.SIGKILL)  # it holds no lease: nothing of the job is lost
    first.wait()
    record = await app.get_job(handle.id)
    assert record.state is JobState.WAITING and record.lease_expires_at is None
    assert (await app.signal(handle.id, "approved", "yes")).outcome is SignalOutcome.DELIVERED
    assert (await app.signal(handle.id, "approved", "again")).outcome is SignalOutcome.KEPT
    second = cli.start(*FAST)
    assert await handle.result(timeout=60) == "yes"
    second.send_signal(signal.SIGTERM)
    assert second.wait(30) == 0
    words = [ln.split()[0] for ln in cli.lines()]
    assert words == ["asked", "approved"], cli.lines()  # the step before the wait ran once


async def test_a_loop_of_waits_and_steps_replays_in_order_after_a_sigkill(
    cli: Cli, app: skiplock.App
) -> None:
    """Four messages wait in the mailbox; the worker handles ``a`` and ``b`` (each in a step)
    and is SIGKILLed. The next worker replays both waits and both steps from what is stored,
    in order, then takes ``c`` and ``stop``: each message handled once, none skipped."""
    handle = await workflow_app.inbox.aenqueue()
    sent = [await app.signal(handle.id, "next", msg) for msg in ("a", "b", "c", "stop")]
    first = cli.start(*FAST)
    await await_until(lambda: first.poll() is not None, "the worker to die", 30)
    assert first.returncode == -signal.SIGKILL
    second = cli.start(*FAST)
    assert await handle.result(timeout=60) == ["a", "b", "c"]
    second.send_signal(signal.SIGTERM)
    assert second.wait(30) == 0
    words = [ln.rsplit(" ", 1)[0] for ln in cli.lines()]  # without the pid
    assert words == ["handled a", "handled b", "crash", "handled c"], cli.lines()
    assert {r.outcome for r in sent} == {SignalOutcome.KEPT}  # none waited for yet
