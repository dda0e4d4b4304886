"""Workflows (issue 26) on both backends: dependencies and their failure policies, the canvas
(chain, group, chord), batches, durable steps, and waiting for a signal; each at small size,
run by an in-process burst worker (``app.drain``)."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

import skiplock
from skiplock import (
    BatchClosed,
    ConfigurationError,
    JobState,
    SignalOutcome,
    SignalTimeout,
    UnknownParent,
    WorkflowCycle,
    chain,
    chord,
    group,
)
from skiplock._job import JobFilter

from .helpers import FakeClock


def tasks(app: skiplock.App) -> dict[str, Any]:
    """A few tasks that record their calls."""
    calls: list[tuple[str, tuple[Any, ...]]] = []
    broken = {"boom": True}

    @app.task(name="add")
    def add(x: int, y: int = 0) -> int:
        calls.append(("add", (x, y)))
        return x + y

    @app.task(name="total")
    def total(values: list[int]) -> int:
        calls.append(("total", (values,)))
        return sum(values)

    @app.task(name="boom", max_attempts=1)
    def boom() -> None:
        calls.append(("boom", ()))
        if broken["boom"]:
            raise RuntimeError("boom")

    @app.task(name="note")
    def note(*args: Any) -> list[Any]:
        calls.append(("note", args))
        return list(args)

    return {
        "add": add,
        "total": total,
        "boom": boom,
        "note": note,
        "calls": calls,
        "broken": broken,
    }


async def state(app: skiplock.App, job_id: int) -> JobState:
    return (await app.get_job(job_id)).state


# -- dependencies ------------------------------------------------------------------------------


async def test_a_child_waits_until_every_parent_succeeded(app: skiplock.App) -> None:
    t = tasks(app)
    a = await t["add"].aenqueue(1, 2)
    b = await t["add"].aenqueue(3, 4)
    child = await t["note"].using(depends_on=[a, b.id]).aenqueue("done")
    assert await state(app, child.id) is JobState.WAITING
    waiting = await app.waiting_jobs()
    assert [(w.id, w.parents_left, w.signal) for w in waiting] == [(child.id, 2, None)]
    await app.drain()
    assert await child.result(timeout=5) == ["done"]
    assert [c[0] for c in t["calls"]][-1] == "note"  # after both parents
    links = await app.job_links(child.id)
    assert [(p.id, p.state) for p in links.parents] == [(a.id, "succeeded"), (b.id, "succeeded")]
    assert await (await app.job(child.id)).fetch()
    ctx_results: dict[int, Any] = {}

    @app.task(name="reader")
    async def reader() -> None:
        ctx_results.update(await skiplock.current_job().parent_results())

    r = await reader.using(depends_on=[a, b]).aenqueue()
    await app.drain()
    await r.result(timeout=5)
    assert ctx_results == {a.id: 3, b.id: 7}


async def test_a_child_of_finished_parents_is_pending_at_once(app: skiplock.App) -> None:
    t = tasks(app)
    a = await t["add"].aenqueue(1)
    await app.drain()
    child = await t["note"].using(depends_on=[a]).aenqueue()
    assert await state(app, child.id) is JobState.PENDING


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("cancel", JobState.CANCELLED), ("run", JobState.SUCCEEDED), ("wait", JobState.WAITING)],
)
async def test_a_failed_parent_leaves_its_child_to_its_policy(
    app: skiplock.App, policy: Any, expected: JobState
) -> None:
    t = tasks(app)
    parent = await t["boom"].aenqueue()
    child = await t["note"].using(depends_on=[parent], on_parent_failure=policy).aenqueue()
    grandchild = await t["note"].using(depends_on=[child]).aenqueue()
    await app.drain()
    assert await state(app, parent.id) is JobState.DEAD
    assert await state(app, child.id) is expected
    record = await app.get_job(child.id)
    if policy == "cancel":
        assert record.errors[-1]["type"] == "ParentFailed"
        assert f"parent job {parent.id} ended dead" in record.errors[-1]["message"]
        assert await state(app, grandchild.id) is JobState.CANCELLED  # down the graph
    if policy == "wait":  # a person retries the parent; when it succeeds the child runs
        assert await state(app, grandchild.id) is JobState.WAITING
        t["broken"]["boom"] = False
        assert await app.retry_job(parent.id)
        await app.drain()
        assert await state(app, child.id) is JobState.SUCCEEDED
        assert await state(app, grandchild.id) is JobState.SUCCEEDED


async def test_cancelling_a_waiting_job_cancels_its_children(app: skiplock.App) -> None:
    t = tasks(app)
    a = await t["add"].using(run_after=__import__("datetime").timedelta(hours=1)).aenqueue(1)
    b = await t["note"].using(depends_on=[a]).aenqueue()
    c = await t["note"].using(depends_on=[b]).aenqueue()
    assert await app.cancel_job(b.id) is JobState.CANCELLED
    assert await state(app, c.id) is JobState.CANCELLED
    assert await state(app, a.id) is JobState.PENDING


async def test_unknown_parents_and_cycles_are_refused_and_write_nothing(app: skiplock.App) -> None:
    t = tasks(app)
    with pytest.raises(UnknownParent, match="no job 999999"):
        await t["note"].using(depends_on=[999_999]).aenqueue()
    with pytest.raises(ConfigurationError, match="depends_on"):
        t["note"].using(depends_on=["1"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="on_parent_failure"):
        t["note"].using(on_parent_failure="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unique_key= with depends_on"):
        t["note"].using(depends_on=[1], unique_key="k")
    assert await app.count_jobs() == 0
    async with app.batch(on_complete=t["note"].s()) as batch:
        callback = (await batch.info()).on_complete
        assert callback is not None
        with pytest.raises(WorkflowCycle, match="cycle"):
            await t["note"].using(depends_on=[callback]).aenqueue()
    assert (await batch.info()).total == 0


async def test_a_canvas_mixing_two_apps_is_refused_and_writes_nothing(
    app: skiplock.App, tmp_path: Any
) -> None:
    """Its jobs would all go to the first step's database, where the other app's workers
    never look."""
    t = tasks(app)
    other = skiplock.App(f"sqlite:///{tmp_path}/other.db")
    try:

        @other.task(name="elsewhere")
        def elsewhere(*values: Any) -> None: ...

        with pytest.raises(ConfigurationError, match="'elsewhere' is of another app"):
            await chain(t["add"].s(1), elsewhere.s()).aenqueue()
        with pytest.raises(ConfigurationError, match="of another app"):
            await chord([t["add"].s(1), elsewhere.s()], t["add"].s()).aenqueue()
    finally:
        await other.close()
    assert await app.count_jobs() == 0


async def test_a_pruned_parent_is_refused_at_enqueue_and_a_gone_one_fails(
    app: skiplock.App,
) -> None:
    t = tasks(app)
    parent = await t["add"].using(run_after=__import__("datetime").timedelta(hours=1)).aenqueue(1)
    child = await t["note"].using(depends_on=[parent]).aenqueue()
    assert await app.cancel_job(parent.id, who="test") is JobState.CANCELLED
    # the cancel released the child already (cancelled by its policy); a new child of the
    # pruned parent is refused
    assert await state(app, child.id) is JobState.CANCELLED
    await app.prune(finished_age_s=0, dead_age_s=0)
    with pytest.raises(UnknownParent, match=f"no job {parent.id}"):
        await t["note"].using(depends_on=[parent]).aenqueue()


# -- the canvas --------------------------------------------------------------------------------


async def test_a_chain_passes_each_result_on(app: skiplock.App) -> None:
    t = tasks(app)
    handle = await chain(t["add"].s(1, 2), t["add"].s(10), t["add"].s(100)).aenqueue()
    assert [await state(app, i) for i in handle.ids] == [
        JobState.PENDING,
        JobState.WAITING,
        JobState.WAITING,
    ]
    await app.drain()
    assert await handle.result(timeout=5) == 113
    assert [c for c in t["calls"] if c[0] == "add"] == [
        ("add", (1, 2)),
        ("add", (3, 10)),
        ("add", (13, 100)),
    ]
    record = await app.get_job(handle.ids[1])
    assert record.args == [3, 10]  # the previous result, stored in the row


async def test_a_group_and_a_chord(app: skiplock.App) -> None:
    t = tasks(app)
    g = await group(t["add"].s(i) for i in range(5)).aenqueue()
    c = await chord([t["add"].s(i, i) for i in range(4)], t["total"].s()).aenqueue()
    piped = await (group(t["add"].s(1), t["add"].s(2)) | t["total"].s() | t["add"].s(5)).aenqueue()
    await app.drain()
    assert await g.result(timeout=5) == [0, 1, 2, 3, 4]
    assert await c.result(timeout=5) == 12
    assert await piped.result(timeout=5) == 8
    totals = [c for c in t["calls"] if c[0] == "total"]
    assert ("total", ([0, 2, 4, 6],)) in totals  # member order


async def test_an_immutable_signature_takes_no_result(app: skiplock.App) -> None:
    t = tasks(app)
    handle = await chain(t["add"].s(1), t["note"].si("fixed")).aenqueue()
    await app.drain()
    assert await handle.result(timeout=5) == ["fixed"]


async def test_a_workflow_is_all_or_nothing(app: skiplock.App) -> None:
    t = tasks(app)
    with pytest.raises(TypeError, match=r"not JSON serializable|argument"):
        await chain(t["add"].s(1), t["note"].s(object())).aenqueue()
    await app.set_queue_limits("full", max_depth=0, create=True)
    with pytest.raises(skiplock.QueueFull):
        await chain(t["add"].s(1), t["add"].s().set(queue="full"), t["add"].s(3)).aenqueue()
    assert await app.count_jobs() == 0


async def test_a_structured_result_goes_first_into_each_childs_own_arguments(
    app: skiplock.App,
) -> None:
    """The one parent's result, whatever its JSON (an object of lists, a string with a
    bracket, null), in front of each child's own arguments (none, or several), as the
    children are released together (SQLite writes them in one statement)."""
    t = tasks(app)
    handle = await chain(
        t["note"].s({"k": [1, [2]], "s": "a]b,"}),
        group(t["note"].s(), t["note"].s("x", [3]), t["note"].s(None)),
    ).aenqueue()
    await app.drain()
    first = [{"k": [1, [2]], "s": "a]b,"}]
    assert await handle.result(timeout=5) == [[first], [first, "x", [3]], [first, None]]


async def test_a_chain_on_the_callers_connection_outside_a_transaction_is_all_or_none(
    db_url: str, app: skiplock.App
) -> None:
    """No transaction open on the caller's connection: the workflow takes one of its own (a
    worker never sees a child pending before it is made to wait)."""
    t = tasks(app)
    if db_url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        handle = chain(t["add"].s(1), t["add"].s(2)).using(connection=conn).enqueue()
        conn.close()
    else:
        import psycopg

        from skiplock._backends.postgres.url import parse_postgres_url

        parsed = parse_postgres_url(db_url)
        async with await psycopg.AsyncConnection.connect(parsed.dsn, autocommit=True) as conn:
            await conn.execute(f'SET search_path TO "{parsed.schema}"')
            handle = await chain(t["add"].s(1), t["add"].s(2)).using(connection=conn).aenqueue()
    assert [await state(app, i) for i in handle.ids] == [JobState.PENDING, JobState.WAITING]
    await app.drain()
    assert await handle.result(timeout=5) == 3


async def test_a_chain_in_the_callers_transaction(db_url: str, app: skiplock.App) -> None:
    t = tasks(app)
    wf = chain(t["add"].s(1), t["add"].s(2))
    if db_url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        handle = wf.using(connection=conn).enqueue()
        conn.execute("ROLLBACK")
        conn.close()
    else:
        import asyncpg

        from skiplock._backends.postgres.url import parse_postgres_url

        parsed = parse_postgres_url(db_url)
        conn = await asyncpg.connect(parsed.dsn)
        try:
            tr = conn.transaction()
            await tr.start()
            handle = await wf.using(connection=conn).aenqueue()
            await tr.rollback()
        finally:
            await conn.close()
    assert len(handle.ids) == 2
    assert await app.count_jobs() == 0  # rolled back with the caller's rows


# -- batches -----------------------------------------------------------------------------------


async def test_a_batch_calls_back_once_when_its_last_member_finished(app: skiplock.App) -> None:
    t = tasks(app)
    async with app.batch(on_success=t["note"].s("ok"), on_complete=t["note"].s("all")) as batch:
        for i in range(5):
            await t["add"].aenqueue(i)
    info = await batch.info()
    assert info.closed and info.total == 5 and info.counts == {"pending": 5}
    await app.drain()
    info = await batch.info()
    assert info.counts == {"succeeded": 5}
    notes = [c[1] for c in t["calls"] if c[0] == "note"]
    assert sorted(notes) == sorted([(batch.id, "ok"), (batch.id, "all")])


async def test_an_open_batch_grows_until_closed(app: skiplock.App) -> None:
    t = tasks(app)
    async with app.batch(on_complete=t["note"].s(), close=False) as batch:
        await t["add"].aenqueue(1)
    await app.drain()
    assert (await batch.info()).counts == {"succeeded": 1}
    assert not [c for c in t["calls"] if c[0] == "note"]  # still open: no callback
    async with app.batch(id=batch.id, close=True):
        await t["add"].aenqueue(2)
    await app.drain()
    assert [c[1] for c in t["calls"] if c[0] == "note"] == [(batch.id,)]
    with pytest.raises(BatchClosed):
        async with app.batch(id=batch.id, close=False):
            await t["add"].aenqueue(3)


async def test_a_failed_member_cancels_on_success_but_runs_on_complete(
    app: skiplock.App,
) -> None:
    t = tasks(app)
    async with app.batch(on_success=t["note"].s("ok"), on_complete=t["note"].s("all")) as b:
        await t["add"].aenqueue(1)
        await t["boom"].aenqueue()
    await app.drain()
    info = await b.info()
    assert info.counts == {"succeeded": 1, "dead": 1}
    assert info.on_success is not None and info.on_complete is not None
    assert await state(app, info.on_success) is JobState.CANCELLED
    assert await state(app, info.on_complete) is JobState.SUCCEEDED


# -- durable steps -----------------------------------------------------------------------------


async def test_a_step_runs_once_across_retries(app: skiplock.App) -> None:
    charged: list[int] = []

    def charge(amount: int) -> dict[str, int]:
        charged.append(amount)
        return {"charge": amount}

    @app.task(name="order", max_attempts=3, retry=skiplock.RetryPolicy(base_s=0, cap_s=0))
    async def order(amount: int) -> Any:
        job = skiplock.current_job()
        receipt = await job.step("charge", charge, amount)
        if job.attempt < 2:
            raise RuntimeError("shipping failed")
        return receipt

    handle = await order.aenqueue(42)
    await app.drain()
    await app.drain()
    assert await handle.result(timeout=5) == {"charge": 42}
    assert charged == [42]
    assert (await app.get_job(handle.id)).attempt == 2


# -- signals -----------------------------------------------------------------------------------


async def test_wait_for_parks_without_a_slot_and_a_signal_resumes_once(
    app: skiplock.App,
) -> None:
    seen: list[Any] = []

    @app.task(name="approve")
    async def approve() -> Any:
        job = skiplock.current_job()
        await job.step("asked", seen.append, "asked")
        payload = await job.wait_for("approved", timeout=3600)
        seen.append(payload)
        return payload

    handle = await approve.aenqueue()
    await app.drain()
    record = await app.get_job(handle.id)
    assert record.state is JobState.WAITING and record.attempt == 0
    assert [(w.id, w.signal) for w in await app.waiting_jobs()] == [(handle.id, "approved")]
    outcomes = [
        await app.signal(handle.id, "approved", {"by": "ann"}),
        await app.signal(handle.id, "approved", {"by": "bob"}),
    ]
    assert [r.outcome for r in outcomes] == [SignalOutcome.DELIVERED, SignalOutcome.KEPT]
    await app.drain()
    assert await handle.result(timeout=5) == {"by": "ann"}  # one wait takes one signal
    assert seen == ["asked", {"by": "ann"}]
    assert (await app.signal(handle.id, "approved")).outcome is SignalOutcome.FINISHED
    with pytest.raises(skiplock.JobNotFound):
        await app.signal(999_999, "approved")


async def test_a_signal_before_the_wait_is_kept_for_it(app: skiplock.App) -> None:
    @app.task(name="later")
    async def later() -> Any:
        return await skiplock.current_job().wait_for("go", timeout=60)

    handle = await later.aenqueue()
    assert (await app.signal(handle.id, "go", 7)).outcome is SignalOutcome.KEPT
    await app.drain()
    assert await handle.result(timeout=5) == 7


async def test_a_timeout_and_a_late_signal_resolve_once_the_signal_kept(
    db_url: str, clock: FakeClock
) -> None:
    app = skiplock.App(db_url, clock=clock)
    await app.migrate()
    try:

        @app.task(name="wait")
        async def wait() -> str:
            try:
                await skiplock.current_job().wait_for("go", timeout=30)
            except SignalTimeout as exc:
                return f"timed out: {exc.name}"
            return "signalled"

        handle = await wait.aenqueue()
        await app.drain()
        backend = await app.backend()
        assert (await backend.workflow_sweep()).timed_out == []
        clock.advance(31)
        assert (await backend.workflow_sweep()).timed_out == [handle.id]
        late = await app.signal(handle.id, "go")
        assert (late.outcome, late.waiting_for) == (SignalOutcome.KEPT, None)  # for a next wait
        await app.drain()
        assert await handle.result(timeout=5) == "timed out: go"
    finally:
        await app.close()


async def test_names_and_timeouts_are_checked(app: skiplock.App) -> None:
    with pytest.raises(ConfigurationError, match="name"):
        await app.signal(1, "")
    with pytest.raises(TypeError, match=r"JSON|serializ"):
        await app.signal(1, "x", object())

    @app.task(name="bad_wait", max_attempts=1)
    async def bad_wait() -> None:
        await skiplock.current_job().wait_for("x", timeout=float("nan"))

    handle = await bad_wait.aenqueue()
    await app.drain()
    record = await app.get_job(handle.id)
    assert record.state is JobState.DEAD
    assert "timeout=nan" in record.errors[-1]["message"]
    assert await app.count_jobs(where=JobFilter(task="bad_wait")) == 1


async def test_a_workflows_size_depth_and_parents_are_bounded(app: skiplock.App) -> None:
    t = tasks(app)
    from skiplock._limits import MAX_PARENTS, MAX_WORKFLOW_DEPTH

    too_deep = chain(*[t["add"].s(1)] + [t["add"].s(1)] * MAX_WORKFLOW_DEPTH)
    with pytest.raises(ConfigurationError, match=f"deeper than {MAX_WORKFLOW_DEPTH} steps"):
        await too_deep.aenqueue()
    too_wide = chord([t["add"].s(i) for i in range(MAX_PARENTS + 1)], t["total"].s())
    with pytest.raises(ConfigurationError, match=f"at most {MAX_PARENTS} others"):
        await too_wide.aenqueue()
    with pytest.raises(ConfigurationError, match=f"at most {MAX_PARENTS} parents"):
        t["note"].using(depends_on=range(1, MAX_PARENTS + 2))
    with pytest.raises(ConfigurationError, match="not a signature"):
        chain(t["add"].s(1), "b")  # type: ignore[arg-type]
    app.eager = True
    try:
        with pytest.raises(ConfigurationError, match="do not run in eager mode"):
            await chain(t["add"].s(1), t["add"].s(2)).aenqueue()
    finally:
        app.eager = False
    assert await app.count_jobs() == 0


async def side_rows(app: skiplock.App, db_url: str) -> dict[str, int]:
    tables = ["steps", "signals", "deps", "waits", "batch_jobs", "batches", "parent_results"]
    backend = await app.backend()
    if db_url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            return {
                t: conn.execute(f"SELECT count(*) FROM skiplock_{t}").fetchone()[0] for t in tables
            }
        finally:
            conn.close()
    schema = backend.schema  # type: ignore[attr-defined]
    pool = backend.pool  # type: ignore[attr-defined]
    return {t: await pool.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_{t}') for t in tables}


async def test_the_retention_takes_what_a_workflow_leaves(db_url: str, app: skiplock.App) -> None:
    t = tasks(app)

    @app.task(name="stepper")
    async def stepper() -> Any:
        job = skiplock.current_job()
        await job.step("one", lambda: 1)
        return await job.wait_for("go", timeout=60)

    flow = await chain(t["add"].s(1), t["add"].s(2)).aenqueue()
    async with app.batch(on_complete=t["note"].s()):
        parked = await stepper.aenqueue()
    await app.drain()
    await app.signal(parked.id, "go", 1)
    await app.drain()
    assert await flow.result(timeout=5) == 3
    before = await side_rows(app, db_url)
    assert before["steps"] == 1 and before["signals"] == 1 and before["deps"] == 2
    assert before["parent_results"] == 2  # the chain's first link's, the batch member's
    await app.prune(finished_age_s=3600, dead_age_s=3600)  # nothing is old enough yet
    assert await side_rows(app, db_url) == before
    await app.prune(finished_age_s=0, dead_age_s=0)
    assert await side_rows(app, db_url) == dict.fromkeys(before, 0)


async def test_a_batch_counts_its_pruned_members_until_it_goes(
    db_url: str, clocked_app: skiplock.App, clock: FakeClock
) -> None:
    """Five images done in a minute, the sixth due in 8 days, and the default retention (7
    days) in between: the callback still counts six members, the five pruned ones as
    ``gone`` (a prune of 2 rows a statement counts each once), and once the batch has
    finished and its callback is pruned too, nothing of it is left."""
    app = clocked_app

    @app.task(name="resize")
    async def resize(image: int) -> None: ...

    @app.task(name="zip_them")
    async def zip_them(batch_id: int) -> dict[str, int]:
        return (await app.batch_info(batch_id)).counts

    async with app.batch(on_complete=zip_them.s()) as batch:
        for image in range(5):
            await resize.aenqueue(image)
        await resize.using(run_after=timedelta(days=8)).aenqueue(5)
    await app.drain()
    clock.advance(7 * 86400 + 60)
    await app.prune(finished_age_s=7 * 86400, dead_age_s=30 * 86400, batch=2)
    info = await batch.info()
    assert info.counts == {"gone": 5, "pending": 1} and info.total == 6
    clock.advance(86400)
    await app.drain()
    record = await app.get_job(info.on_complete)
    assert record.result == {"gone": 5, "succeeded": 1}
    clock.advance(7 * 86400 + 60)
    await app.prune(finished_age_s=7 * 86400, dead_age_s=30 * 86400, batch=2)
    left = await side_rows(app, db_url)
    assert left["batches"] == 0 and left["batch_jobs"] == 0
    with pytest.raises(skiplock.JobNotFound):
        await batch.info()


async def test_a_sync_task_has_steps_waits_and_parent_results(app: skiplock.App) -> None:
    ran: list[str] = []

    @app.task(name="sync_source")
    def sync_source() -> int:
        return 5

    @app.task(name="sync_flow", max_attempts=3, retry=skiplock.RetryPolicy(base_s=0, cap_s=0))
    def sync_flow() -> Any:
        job = skiplock.current_job()
        parents = job.parent_results_sync()
        first = job.step_sync("first", lambda: ran.append("first") or "one")
        if job.attempt == 1:
            raise RuntimeError("again")
        go = job.wait_for_sync("go", timeout=60)
        return [list(parents.values()), first, go]

    source = await sync_source.aenqueue()
    flow = await sync_flow.using(depends_on=[source]).aenqueue()
    await app.drain()
    await app.drain()
    assert (await app.get_job(flow.id)).state is JobState.WAITING
    assert (await app.signal(flow.id, "go", "ok")).outcome is SignalOutcome.DELIVERED
    await app.drain()
    assert await flow.result(timeout=5) == [[5], "one", "ok"]
    assert ran == ["first"]

    @app.task(name="on_loop", max_attempts=1)
    async def on_loop() -> None:
        skiplock.current_job().wait_for_sync("x")

    bad = await on_loop.aenqueue()
    await app.drain()
    record = await app.get_job(bad.id)
    assert record.state is JobState.DEAD
    assert "use await current_job().wait_for(...)" in record.errors[-1]["message"]


async def test_the_graph_keeps_the_nearest_jobs_and_the_job_itself(app: skiplock.App) -> None:
    t = tasks(app)
    flow = await chain(*[t["add"].s(1)] + [t["add"].s(1)] * 5).aenqueue()
    ids = flow.ids
    whole = await app.workflow_graph(ids[2])
    assert [n.id for n in whole.nodes] == ids and not whole.truncated
    assert whole.edges == list(itertools.pairwise(ids))
    assert {n.state for n in whole.nodes} == {"pending", "waiting"}
    near = await app.workflow_graph(ids[-1], most=3)
    assert [n.id for n in near.nodes] == ids[-3:] and near.truncated
    assert near.edges == [(ids[-3], ids[-2]), (ids[-2], ids[-1])]
    exact = await app.workflow_graph(ids[0], most=6)
    assert len(exact.nodes) == 6 and not exact.truncated
    lone = await t["add"].aenqueue(1)
    assert [n.id for n in (await app.workflow_graph(lone.id)).nodes] == [lone.id]


async def test_a_signal_is_in_the_jobs_own_trail_and_its_payload_is_checked(
    app: skiplock.App,
) -> None:
    @app.task(name="parks")
    async def parks() -> Any:
        return await skiplock.current_job().wait_for("go", timeout=60)

    handle = await parks.aenqueue()
    await app.drain()
    with pytest.raises(skiplock.PayloadError, match=r"signal 'go': its payload \(float\)"):
        await app.signal(handle.id, "go", float("nan"))
    assert (await app.signal(handle.id, "go", 1, who="ann")).outcome is SignalOutcome.DELIVERED
    assert (await app.signal(handle.id, "go", 2, who="bob")).outcome is SignalOutcome.KEPT
    await app.drain()
    assert (await app.signal(handle.id, "late", 3, who="cy")).outcome is SignalOutcome.FINISHED
    trail = [(a["who"], a["what"]) for a in (await app.get_job(handle.id)).audit]
    assert trail == [  # a finished job's row is left alone: the audit trail has it
        ("ann", "signal go: delivered"),
        ("bob", "signal go: kept"),
    ]
    assert [(e.who, e.detail) for e in (await app.audit_trail())[:3]] == [
        ("cy", "late: finished"),
        ("bob", "go: kept"),
        ("ann", "go: delivered"),
    ]
