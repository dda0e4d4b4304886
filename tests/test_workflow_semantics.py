"""Workflows used the way docs/guides/workflows.md invites (issue 42), on both databases: a
batch block that raises, a durable step in a loop, a ``wait_for`` loop over a mailbox of
signals, a batch re-opened by id, and a ``wait_for`` timeout far shorter than the sweep (under
a worker and under ``app.drain()``). Each is written as a user writes it; each failed before
for the reason its name gives."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import skiplock
from skiplock import JobState, SignalOutcome, SignalTimeout, Worker

from .helpers import FakeClock

SWEEP_S = 60.0
"""The rescuer's sweep interval in the timeout tests: far longer than the tests' waits, so a
wait that times out in time was ended by the wait timer, not the sweep."""


async def state(app: skiplock.App, job_id: int) -> JobState:
    return (await app.get_job(job_id)).state


# -- a batch block that raises -------------------------------------------------------------------


def image_tasks(app: skiplock.App) -> tuple[Any, Any, Any, list[str]]:
    calls: list[str] = []

    @app.task(name="resize")
    async def resize(image: int) -> int:
        calls.append(f"resize {image}")
        return image

    @app.task(name="zipper")
    async def zipper(batch_id: int) -> str:
        info = await app.batch_info(batch_id)
        done = f"zipped {info.counts.get('succeeded', 0)} of {info.total} images"
        calls.append(done)
        return done

    @app.task(name="report")
    async def report(batch_id: int) -> None:
        calls.append("report")

    return resize, zipper, report, calls


async def test_a_batch_block_that_raises_after_4_of_10_adds_runs_no_callback(
    app: skiplock.App,
) -> None:
    resize, zipper, report, calls = image_tasks(app)
    with pytest.raises(OSError, match="cannot read image 4"):
        async with app.batch(on_success=zipper.s(), on_complete=report.s()) as b:
            for image in range(10):
                if image == 4:
                    raise OSError("cannot read image 4")
                await resize.aenqueue(image)
    await app.drain()
    assert calls == []  # not "zipped 4 of 4 images": nothing ran over the partial batch
    info = await b.info()
    assert info.closed and info.aborted
    assert info.counts == {"cancelled": 4}  # the 4 added had not started: cancelled
    assert info.on_success is not None and info.on_complete is not None
    for callback in (info.on_success, info.on_complete):
        record = await app.get_job(callback)
        assert record.state is JobState.CANCELLED
        assert record.errors[-1]["type"] == "BatchAborted"
        assert "its block raised OSError: cannot read image 4" in record.errors[-1]["message"]
    member = (await app.list_jobs(JobState.CANCELLED, skiplock.JobFilter(task="resize")))[0]
    assert member.errors[-1]["type"] == "BatchAborted"


async def test_members_that_ran_before_the_block_raised_finish_but_no_callback_runs(
    app: skiplock.App,
) -> None:
    resize, zipper, report, calls = image_tasks(app)
    with pytest.raises(OSError):
        async with app.batch(on_success=zipper.s(), on_complete=report.s()) as b:
            for image in range(4):
                await resize.aenqueue(image)
            await app.drain()  # a worker ran the first four already
            raise OSError("cannot read image 4")
    await app.drain()
    assert sorted(calls) == [f"resize {i}" for i in range(4)]  # no "zipped 4 of 4 images"
    info = await b.info()
    assert info.aborted and info.counts == {"succeeded": 4}
    assert info.on_success is not None
    assert await state(app, info.on_success) is JobState.CANCELLED


async def test_a_block_that_raises_on_a_closed_batch_changes_nothing(app: skiplock.App) -> None:
    resize, zipper, _report, calls = image_tasks(app)
    async with app.batch(on_success=zipper.s()) as b:
        await resize.aenqueue(1)
    with pytest.raises(skiplock.BatchClosed):
        async with app.batch(id=b.id):
            await resize.aenqueue(2)
    await app.drain()
    assert calls == ["resize 1", "zipped 1 of 1 images"]
    info = await b.info()
    assert info.counts == {"succeeded": 1} and not info.aborted


# -- a batch re-opened by id ---------------------------------------------------------------------


async def test_reopening_a_batch_by_id_adds_to_it_and_leaves_it_open(app: skiplock.App) -> None:
    resize, zipper, _report, calls = image_tasks(app)
    async with app.batch(on_success=zipper.s(), close=False) as b:
        await resize.aenqueue(1)
    async with app.batch(id=b.id):
        await resize.aenqueue(2)
    assert not (await b.info()).closed  # the guide: app.close_batch(id) closes it
    await app.drain()
    assert calls == ["resize 1", "resize 2"]  # open: no callback yet
    async with app.batch(id=b.id):
        await resize.aenqueue(3)
    assert await app.close_batch(b.id)
    await app.drain()
    assert calls[-1] == "zipped 3 of 3 images"
    async with app.batch(on_success=zipper.s(), close=False) as last:
        await resize.aenqueue(4)
    async with app.batch(id=last.id, close=True):  # the last addition may close it too
        await resize.aenqueue(5)
    assert (await last.info()).closed


# -- durable steps in a loop ---------------------------------------------------------------------


async def test_a_step_in_a_loop_runs_once_per_turn_and_a_retry_replays_them_in_order(
    app: skiplock.App,
) -> None:
    ran: list[int] = []

    def side(i: int) -> int:
        ran.append(i)
        return i * 10

    @app.task(name="charges", max_attempts=2, retry=skiplock.RetryPolicy(base_s=0, cap_s=0))
    async def charges(items: list[int]) -> list[int]:
        j = skiplock.current_job()
        results = [await j.step("charge", side, i) for i in items]
        if j.attempt == 1:
            raise RuntimeError("the shipping API timed out")  # the retry charges nothing
        return results

    handle = await charges.aenqueue([1, 2, 3])
    await app.drain()
    await app.drain()
    assert await handle.result(timeout=5) == [10, 20, 30]
    assert ran == [1, 2, 3]


# -- a wait_for loop over a mailbox --------------------------------------------------------------


def inbox_task(app: skiplock.App) -> Any:
    @app.task(name="inbox", max_attempts=1)
    async def inbox() -> list[Any]:
        job = skiplock.current_job()
        got: list[Any] = []
        while (msg := await job.wait_for("next", timeout=3600)) != "stop":
            got.append(msg)
            if len(got) > 10:
                raise RuntimeError(f"the loop spins: {got}")
        return got

    return inbox


async def test_a_wait_for_loop_takes_each_signal_once_in_order(app: skiplock.App) -> None:
    inbox = inbox_task(app)
    handle = await inbox.aenqueue()
    await app.drain()
    assert await state(app, handle.id) is JobState.WAITING
    receipts = [await app.signal(handle.id, "next", "a")]
    await app.drain()  # runs again from the top: takes "a", parks on the second
    assert await state(app, handle.id) is JobState.WAITING
    receipts += [await app.signal(handle.id, "next", m) for m in ("b", "c", "stop")]
    await app.drain()
    assert await handle.result(timeout=5) == ["a", "b", "c"]
    assert [(r.outcome, r.waiting_for) for r in receipts] == [
        (SignalOutcome.DELIVERED, "next"),  # the first wait's
        (SignalOutcome.DELIVERED, "next"),  # the second's
        (SignalOutcome.KEPT, None),  # pending now: kept for the next waits
        (SignalOutcome.KEPT, None),
    ]


async def test_signals_sent_before_the_loop_waits_are_taken_in_the_order_sent(
    app: skiplock.App,
) -> None:
    inbox = inbox_task(app)
    handle = await inbox.aenqueue()
    receipts = [await app.signal(handle.id, "next", m) for m in ("x", {"y": 1}, None, "stop")]
    await app.drain()
    assert await handle.result(timeout=5) == ["x", {"y": 1}, None]
    assert {(r.outcome, r.waiting_for) for r in receipts} == {(SignalOutcome.KEPT, None)}
    finished = await app.signal(handle.id, "next", "late")
    assert finished.outcome is SignalOutcome.FINISHED and finished.mistaken


async def test_a_timed_out_wait_keeps_its_place_and_a_later_signal_goes_to_the_next_wait(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    app = clocked_app

    @app.task(name="polls")
    async def polls() -> list[str]:
        job = skiplock.current_job()
        seen: list[str] = []
        while len(seen) < 2:
            try:
                seen.append(await job.wait_for("tick", timeout=30))
            except SignalTimeout as exc:
                seen.append(f"timed out: {exc.name}")
        return seen

    handle = await polls.aenqueue()
    await app.drain()
    clock.advance(31)
    await app.drain()  # the first wait timed out; the job waits again
    assert await state(app, handle.id) is JobState.WAITING
    late = await app.signal(handle.id, "tick", "late")
    await app.drain()
    assert await handle.result(timeout=5) == ["timed out: tick", "late"]
    assert late.outcome is SignalOutcome.DELIVERED  # to the second wait, not lost


# -- a wait_for timeout ends when it is due ------------------------------------------------------


def expiring_task(app: skiplock.App, timeout: float) -> Any:
    @app.task(name="expiring")
    async def expiring() -> str:
        try:
            return str(await skiplock.current_job().wait_for("approved", timeout=timeout))
        except SignalTimeout:
            return "expired"

    return expiring


async def test_a_short_wait_times_out_when_due_not_at_the_sweep(app: skiplock.App) -> None:
    expiring = expiring_task(app, timeout=0.3)
    handle = await expiring.aenqueue()
    worker = Worker(app, poll_interval_s=SWEEP_S, maintenance_interval_s=SWEEP_S)
    running = asyncio.create_task(worker.run())
    try:  # within half the sweep's interval: the wait timer ended it, not the sweep
        assert await handle.result(timeout=SWEEP_S / 2) == "expired"
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, timeout=30)


async def test_a_wait_parked_before_the_worker_started_times_out_when_due(
    app: skiplock.App,
) -> None:
    expiring = expiring_task(app, timeout=0.5)
    handle = await expiring.aenqueue()
    await app.drain()  # parked by another worker, which is gone
    assert await state(app, handle.id) is JobState.WAITING
    worker = Worker(app, poll_interval_s=SWEEP_S, maintenance_interval_s=SWEEP_S)
    running = asyncio.create_task(worker.run())
    try:
        assert await handle.result(timeout=SWEEP_S / 2) == "expired"
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, timeout=30)


async def test_a_failing_expiry_of_a_wait_does_not_end_the_worker(
    app: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An expiry the database refuses (a bug, a trigger of the user's: here, the first two
    tries) is logged and tried again later; the worker goes on, and the wait still ends (at
    that try, or at the rescuer's sweep)."""
    expiring = expiring_task(app, timeout=0.2)
    handle = await expiring.aenqueue()
    await app.drain()
    backend = await app.backend()
    real = backend.workflow_expire_waits
    refused = 0

    async def refusing() -> list[int]:
        nonlocal refused
        if refused < 2:
            refused += 1
            raise RuntimeError("refused by a trigger")
        return await real()

    monkeypatch.setattr(backend, "workflow_expire_waits", refusing)
    worker = Worker(app, poll_interval_s=0.05, maintenance_interval_s=0.2)
    running = asyncio.create_task(worker.run())
    try:
        assert await handle.result(timeout=20) == "expired"
        assert refused >= 1 and not running.done()
    finally:
        worker.request_stop()
        await asyncio.wait_for(running, timeout=30)


async def test_drain_runs_a_wait_whose_timeout_has_passed(
    clocked_app: skiplock.App, clock: FakeClock
) -> None:
    expiring = expiring_task(clocked_app, timeout=30)
    handle = await expiring.aenqueue()
    await clocked_app.drain()
    assert await state(clocked_app, handle.id) is JobState.WAITING
    await clocked_app.drain()  # not due yet: drain does not wait for it
    assert await state(clocked_app, handle.id) is JobState.WAITING
    clock.advance(31)
    await clocked_app.drain()
    assert await handle.result(timeout=5) == "expired"


async def test_the_sweep_resumes_a_parked_job_whose_signal_came_as_it_parked(
    app: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signal comes after the job recorded its wait and before its park is written, and
    the look for it after that completion is lost (a failed statement, a dead process): the
    job is parked with its signal stored. The sweep runs it (before, only its timeout did)."""
    from skiplock._backends import workflow_flows

    backend = await app.backend()
    prepare = backend.workflow_wait_prepare
    after = workflow_flows.after_completion

    async def prepare_then_signal(params: Any) -> bool:
        prepared = await prepare(params)
        await app.signal(params.job_id, "approved", "came as it parked")
        return prepared

    def look_lost(finished: Any, parked: Any) -> Any:
        return after(finished, [])

    monkeypatch.setattr(backend, "workflow_wait_prepare", prepare_then_signal)
    monkeypatch.setattr(workflow_flows, "after_completion", look_lost)
    expiring = expiring_task(app, timeout=3600)
    handle = await expiring.aenqueue()
    await app.drain()
    assert await state(app, handle.id) is JobState.WAITING  # its signal is stored
    assert handle.id in (await backend.workflow_sweep()).released
    await app.drain()
    assert await handle.result(timeout=5) == "came as it parked"


# -- the upgrade ---------------------------------------------------------------------------------


async def test_steps_signals_and_parked_waits_written_before_the_upgrade_are_the_first(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job parked on ``go`` by the release before the workflow sequences, with a stored step
    and a signal of another name: after ``migrate`` its rows are the first of their names, so
    the step is not run again, the kept signal is read, and a signal of ``go`` resumes it."""
    from skiplock._backends.postgres import statements as postgres_sql
    from skiplock._backends.sqlite import migrate as sqlite_sql

    postgres = db_url.startswith("postgresql")
    sql_module: Any = postgres_sql if postgres else sqlite_sql
    # every other one is applied, but the signals' senders: it changes the table the
    # sequences reshape, and always comes after them
    later = ("workflow sequences", "signal senders, kept results")
    before = [m for m in sql_module.MIGRATIONS if m[1] not in later]
    monkeypatch.setattr(sql_module, "MIGRATIONS", before)
    ran: list[str] = []

    def app_of_the_release() -> tuple[skiplock.App, Any]:
        app = skiplock.App(db_url)

        @app.task(name="upgraded")
        async def upgraded() -> list[Any]:
            job = skiplock.current_job()
            charged = await job.step("charge", ran.append, "charged again")
            early = await job.wait_for("early", timeout=3600)
            go = await job.wait_for("go", timeout=3600)
            return [charged, early, go]

        return app, upgraded

    app, upgraded = app_of_the_release()
    await app.migrate()
    handle = await upgraded.aenqueue()
    rows = [  # what the earlier release wrote: no occurrence numbers
        "INSERT INTO {s}skiplock_steps (job_id, name, result) VALUES ({id}, 'charge', '1')",
        "INSERT INTO {s}skiplock_signals (job_id, name, kind, payload) "
        "VALUES ({id}, 'early', 'signal', '\"kept\"')",
        "INSERT INTO {s}skiplock_waits (job_id, signal) VALUES ({id}, 'go')",
        "UPDATE {s}{jobs} SET state = 'waiting' WHERE id = {id}",
    ]
    backend: Any = await app.backend()
    if postgres:
        for row in rows:
            schema = f'"{backend.schema}".'
            await backend.pool.execute(row.format(s=schema, jobs="skiplock_jobs", id=handle.id))
    else:
        import sqlite3

        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            for row in rows:
                conn.execute(row.format(s="", jobs="skiplock_jobs_live", id=handle.id))
    await app.close()
    monkeypatch.undo()
    app, _ = app_of_the_release()
    try:
        assert await app.migrate()
        receipt = await app.signal(handle.id, "go", "after the upgrade")
        assert (receipt.outcome, receipt.waiting_for) == (SignalOutcome.DELIVERED, "go")
        await app.drain()
        result = await (await app.job(handle.id)).result(timeout=5)
        assert result == [1, "kept", "after the upgrade"]
        assert ran == []
    finally:
        await app.close()
