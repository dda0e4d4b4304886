"""A job row, its mailbox and the WAL stay bounded under repeated events (issue 43, item 5), on
both databases: a loop of signals to one job, a loop of cancels of a running job, a loop of
every person's action on one job, a flood of signals no wait takes, and a fan-out of a big
result. Each is the loop a user (or an attacker with the app) writes; each failed before:
the job's ``audit`` list grew by one entry an event and was rewritten whole each time (4,000
signals: 81 MB of WAL), a repeated cancel rewrote the row, a mailbox took any number of
signals, and a parent's result was copied onto every edge (253 kB to 1,000 children: 271 MB
of WAL). The WAL bounds count only this test's own relations (tests/wal.py), derived from the
data written, never from a timing."""

from __future__ import annotations

import secrets
import sqlite3
from typing import Any

import pytest

import skiplock
from skiplock import JobState, MailboxFull, SignalOutcome
from skiplock._backends.params import ClaimParams
from skiplock._limits import JOB_AUDIT_KEPT

from .helpers import PG_URL
from .wal import wal_meter

SIGNALS = 300
"""Signals of the loop on both databases: fifteen times the entries a row keeps."""
BLOCK = 250
"""Signals between two readings of the WAL."""


def schema_of(app: skiplock.App) -> str:
    return app.url.split("schema=", 1)[1]


def entries(job: skiplock.JobRecord) -> list[tuple[str, str]]:
    return [(str(e["who"]), str(e["what"])) for e in job.audit if "omitted" not in e]


def omitted(job: skiplock.JobRecord) -> int:
    counts = [int(e["omitted"]) for e in job.audit if "omitted" in e]
    assert counts in ([], [counts[0]]) and ("omitted" in job.audit[0] if counts else True)
    return counts[0] if counts else 0


def parker(app: skiplock.App) -> Any:
    @app.task(name="approve")
    async def approve() -> Any:
        return await skiplock.current_job().wait_for("approved", timeout=3600)

    return approve


# -- a loop of signals ---------------------------------------------------------------------------


async def test_a_loop_of_signals_keeps_the_jobs_trail_to_its_last_entries(
    app: skiplock.App,
) -> None:
    job = await parker(app).aenqueue()
    for i in range(SIGNALS):
        receipt = await app.signal(job.id, "approved", {"n": i}, who=f"person {i}")
        assert receipt.outcome is SignalOutcome.KEPT
    record = await app.get_job(job.id)
    assert len(record.audit) == JOB_AUDIT_KEPT + 1  # the last entries and their count
    assert omitted(record) == SIGNALS - JOB_AUDIT_KEPT
    assert record.audit[0]["what"] == f"{SIGNALS - JOB_AUDIT_KEPT} earlier actions left out"
    assert entries(record) == [
        (f"person {i}", "signal approved: kept") for i in range(SIGNALS - JOB_AUDIT_KEPT, SIGNALS)
    ]
    trail = await app.audit_trail(limit=SIGNALS)  # every one is in the audit trail
    assert [e.who for e in reversed(trail)] == [f"person {i}" for i in range(SIGNALS)]
    # and the job takes them in order all the same
    await app.drain()
    assert await job.result(timeout=10) == {"n": 0}


async def test_a_signal_to_a_finished_job_leaves_its_row_alone(app: skiplock.App) -> None:
    @app.task(name="quick")
    async def quick() -> int:
        return 1

    job = await quick.aenqueue()
    await app.drain()
    before = await app.get_job(job.id)
    for _ in range(50):
        assert (await app.signal(job.id, "late", who="mallory")).outcome is (SignalOutcome.FINISHED)
    after = await app.get_job(job.id)
    assert after.audit == before.audit == []
    details = [e.detail for e in await app.audit_trail(limit=100)]
    assert details == ["late: finished"] * 50


async def test_the_wal_of_a_signal_loop_is_the_same_for_each_signal(pg_url: str) -> None:
    """1,000 signals to one job, in four blocks of 250: each block writes the same WAL to the
    job's relations (its row holds at most the kept entries), where each signal rewrote the
    whole list (O(n²): the fourth block wrote five times the first; 4,000 signals, 81 MB).
    The bound, from the rows written: a signal writes a few times its rows' sizes (the job's
    row, its signal, its audit trail entry, their index entries), and the last block no more
    than the first."""
    app = skiplock.App(pg_url)
    await app.migrate()
    try:
        job = await parker(app).aenqueue()
        written = []
        async with wal_meter(PG_URL, schema_of(app)) as meter:
            for block in range(4):
                start = await meter.mark()
                for i in range(BLOCK):
                    await app.signal(job.id, "approved", {"n": i}, who=f"person {block}.{i}")
                written.append(await meter.since(start))
        backend: Any = await app.backend()
        row = await backend.pool.fetchval(
            f'SELECT pg_column_size(j.*) FROM "{backend.schema}".skiplock_jobs j WHERE id = $1',
            job.id,
        )
        signal_row = await backend.pool.fetchval(
            f'SELECT max(pg_column_size(s.*)) FROM "{backend.schema}".skiplock_signals s'
        )
        per_signal = 4 * (row + signal_row) + 2048
        assert all(w <= BLOCK * per_signal for w in written), (written, row, signal_row)
        assert written[-1] <= 1.5 * written[0] + BLOCK * 512, written
    finally:
        await app.close()


# -- a loop of cancels ---------------------------------------------------------------------------


async def test_a_loop_of_cancels_of_a_running_job_records_the_first_only(
    app: skiplock.App,
) -> None:
    """A job a worker holds (claimed under its lease, as a long job is) cancelled 200 times:
    its row records the first cancel, the audit trail every one; and a finished job's row
    takes no cancel either."""

    @app.task(name="busy")
    async def busy() -> str:
        return "done"

    job = await busy.aenqueue()
    backend = await app.backend()
    (claimed,) = await backend.job_get_available(ClaimParams(None, 1, "w", "tok", 600.0, 0.0))
    assert claimed.id == job.id
    for i in range(200):
        assert await app.cancel_job(job.id, who=f"person {i}") is JobState.RUNNING
    assert entries(await app.get_job(job.id)) == [("person 0", "cancel")]
    other = await busy.aenqueue()
    for i in range(50):
        assert await app.cancel_job(other.id, who=f"late {i}") is JobState.CANCELLED
    assert entries(await app.get_job(other.id)) == [("late 0", "cancel")]
    cancels = [e for e in await app.audit_trail(limit=1000) if e.what == "cancel"]
    assert len(cancels) == 250  # every one is in the audit trail


# -- every action on one job, in a loop ----------------------------------------------------------


async def test_every_persons_action_keeps_the_row_to_its_last_entries(app: skiplock.App) -> None:
    """Retry and cancel, requeue and discard of a dead job, and the retry of a child that
    waits for its parents again: each path appends within the bound, with the count."""

    @app.task(name="idle", queue="nobody")
    async def idle() -> None:
        return None

    @app.task(name="fails", max_attempts=1)
    async def fails() -> None:
        raise RuntimeError("no")

    plain = await idle.aenqueue()
    for i in range(15):  # 30 entries
        assert await app.cancel_job(plain.id, who=f"c{i}") is JobState.CANCELLED
        assert await app.retry_job(plain.id, who=f"r{i}")
    record = await app.get_job(plain.id)
    assert len(record.audit) == JOB_AUDIT_KEPT + 1 and omitted(record) == 30 - JOB_AUDIT_KEPT
    expected = [(f"{w}{i}", a) for i in range(15) for w, a in (("c", "cancel"), ("r", "retry"))]
    assert entries(record) == expected[-JOB_AUDIT_KEPT:]

    dead = await fails.aenqueue()
    actions: list[tuple[str, str]] = []
    for i in range(16):
        await app.drain(queues=["default"])  # not "nobody": ``plain`` stays pending
        assert (await app.get_job(dead.id)).state is JobState.DEAD
        where = skiplock.JobFilter(task="fails")
        if i % 2:
            assert await app.requeue_dead(where, who=f"q{i}") == [dead.id]
            actions.append((f"q{i}", "requeue"))
        else:
            assert await app.discard_dead(where, who=f"d{i}") == [dead.id]
            assert await app.retry_job(dead.id, who=f"r{i}")
            actions += [(f"d{i}", "discard"), (f"r{i}", "retry")]
    record = await app.get_job(dead.id)
    assert entries(record) == actions[-JOB_AUDIT_KEPT:]
    assert omitted(record) == len(actions) - JOB_AUDIT_KEPT

    child = await idle.using(depends_on=[plain.id]).aenqueue()  # waits: its parent never runs
    for i in range(12):
        assert await app.cancel_job(child.id, who=f"c{i}") is JobState.CANCELLED
        assert await app.retry_job(child.id, who=f"w{i}")  # waits for its parent again
        assert (await app.get_job(child.id)).state is JobState.WAITING
    record = await app.get_job(child.id)
    expected = [(f"{w}{i}", a) for i in range(12) for w, a in (("c", "cancel"), ("w", "retry"))]
    assert entries(record) == expected[-JOB_AUDIT_KEPT:]
    assert omitted(record) == 24 - JOB_AUDIT_KEPT


async def test_a_who_past_the_text_bound_is_refused_at_the_edge(app: skiplock.App) -> None:
    job = await parker(app).aenqueue()
    for act in (
        lambda who: app.signal(job.id, "approved", who=who),
        lambda who: app.cancel_job(job.id, who=who),
        lambda who: app.retry_job(job.id, who=who),
        lambda who: app.requeue_dead(skiplock.JobFilter(), who=who),
    ):
        with pytest.raises(skiplock.ConfigurationError, match=r"who.*at most 1000 bytes"):
            await act("x" * 100_000)
        with pytest.raises(skiplock.ConfigurationError, match=r"who.*NUL"):
            await act("ann\x00")
    assert (await app.get_job(job.id)).audit == []


# -- the mailbox ---------------------------------------------------------------------------------


async def test_a_flood_of_signals_stops_at_the_mailbox_bound(db_url: str) -> None:
    """A job keeps at most ``max_signals_kept`` signals no wait took, of every name: the next
    is refused (MailboxFull naming the job and the bound), nothing written; once its waits
    take some, as many more are kept, in order."""
    app = skiplock.App(db_url, max_signals_kept=5)
    await app.migrate()
    try:

        @app.task(name="reader")
        async def reader(n: int) -> list[Any]:
            job = skiplock.current_job()
            return [await job.wait_for("msg", timeout=3600) for _ in range(n)]

        job = await reader.aenqueue(8)
        for i in range(4):
            await app.signal(job.id, "msg", i)
        await app.signal(job.id, "other", "typo")  # another name counts too
        for attempt in range(3):
            with pytest.raises(MailboxFull) as refused:
                await app.signal(job.id, "msg", 100 + attempt, who="flood")
            assert str(refused.value) == (
                f"job {job.id}: its mailbox holds max_signals_kept=5 signals no wait_for took "
                "yet; this one was not kept (send it again once the job has taken some)"
            )
            assert (refused.value.job_id, refused.value.most) == (job.id, 5)
        assert [e.who for e in await app.audit_trail()].count("flood") == 0
        await app.drain()  # it takes the four, and parks on its fifth
        assert (await app.get_job(job.id)).state is JobState.WAITING
        for i in range(4, 8):  # four taken: room for four more (the typo still counts)
            await app.signal(job.id, "msg", i)
        with pytest.raises(MailboxFull):
            await app.signal(job.id, "msg", 99)
        await app.drain()
        assert await job.result(timeout=10) == list(range(8))
        with pytest.raises(skiplock.ConfigurationError, match="max_signals_kept"):
            skiplock.App(db_url, max_signals_kept=0)
    finally:
        await app.close()


# -- a fan-out of a big result -------------------------------------------------------------------

CHILDREN = 300
RESULT_BYTES = 200_000


async def test_a_big_result_to_many_children_is_stored_once(db_url: str) -> None:
    """A parent's 200 kB result to 300 children (``depends_on``): kept once, not on each of
    the 300 edges (60 MB), and every child still reads it, also after the parent is gone."""
    app = skiplock.App(db_url)
    await app.migrate()
    blob = secrets.token_urlsafe(RESULT_BYTES)[:RESULT_BYTES]  # compresses to no less
    try:

        @app.task(name="parent", queue="first")
        async def parent() -> str:
            return blob

        @app.task(name="child", queue="later")
        async def child() -> list[int]:
            results = await skiplock.current_job().parent_results()
            return [len(r) for r in results.values()]

        top = await parent.aenqueue()
        kids = [await child.using(depends_on=[top]).aenqueue() for _ in range(CHILDREN)]
        await app.drain(queues=["first"])
        assert {(await app.get_job(k.id)).state for k in kids} == {JobState.PENDING}
        assert await stored_copies(app) == 1
        await app.drain()
        assert {tuple(await k.result(timeout=10)) for k in kids} == {(RESULT_BYTES,)}
        await app.prune(finished_age_s=0, dead_age_s=0)  # every job, the parent too
        assert await stored_copies(app) == 0  # gone with its last child's edge
    finally:
        await app.close()


async def stored_copies(app: skiplock.App) -> int:
    """How many times the result is stored for the edges: on the edges themselves, and in the
    parents' kept results."""
    backend: Any = await app.backend()
    edges = "SELECT count(*) FROM {s}skiplock_deps WHERE parent_result IS NOT NULL"
    kept = "SELECT count(*) FROM {s}skiplock_parent_results"
    if hasattr(backend, "pool"):
        s = f'"{backend.schema}".'
        found = await backend.pool.fetchval("SELECT to_regclass($1)", s + "skiplock_parent_results")
        queries = (edges, kept) if found else (edges,)
        return sum([await backend.pool.fetchval(q.format(s=s)) for q in queries])
    conn = sqlite3.connect(app.url.removeprefix("sqlite:///"))
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        queries = (edges, kept) if "skiplock_parent_results" in names else (edges,)
        return sum(conn.execute(q.format(s="")).fetchone()[0] for q in queries)
    finally:
        conn.close()


async def test_the_wal_of_a_fan_out_holds_the_result_once(pg_url: str) -> None:
    """The parent's completion and its release to 300 children write the 200 kB result a
    few times (the parent's row, the kept result), not once an edge: under a tenth of the
    300 copies' 60 MB, and a bounded amount a child beside it."""
    app = skiplock.App(pg_url)
    await app.migrate()
    blob = secrets.token_urlsafe(RESULT_BYTES)[:RESULT_BYTES]
    try:

        @app.task(name="parent", queue="first")
        async def parent() -> str:
            return blob

        @app.task(name="child", queue="later")
        async def child() -> None:
            return None

        top = await parent.aenqueue()
        for _ in range(CHILDREN):
            await child.using(depends_on=[top]).aenqueue()
        async with wal_meter(PG_URL, schema_of(app)) as meter:
            start = await meter.mark()
            await app.drain(queues=["first"])
            written = await meter.since(start)
        # the result in the parent's row and in the kept result (WAL and TOAST), each child
        # made pending (its row moved to the pending partition, its wait row gone, its edge
        # resolved): 4 kB a child is ample
        assert written <= 4 * RESULT_BYTES + CHILDREN * 4096, written
        assert written < CHILDREN * RESULT_BYTES / 10, written
    finally:
        await app.close()


async def test_an_edge_resolved_before_the_upgrade_passes_its_own_copy(app: skiplock.App) -> None:
    """Edges resolved before migration 23 hold their parent's result themselves (and no kept
    result exists for it): a chord's body released after the upgrade gets it all the same,
    beside its other member's result kept the new way; so does ``parent_results``."""

    @app.task(name="first", queue="a")
    async def first() -> str:
        return "new"

    @app.task(name="second", queue="b")
    async def second() -> str:
        return "late"

    @app.task(name="body", queue="c")
    async def body(values: list[str]) -> list[Any]:
        mine = await skiplock.current_job().parent_results()
        return [values, sorted(mine.values())]

    flow = await skiplock.chord([first.s(), second.s()], body.s()).aenqueue()
    await app.drain(queues=["a"])  # the first member's edge resolves, its result kept once
    await old_layout(app, flow.ids[0], '"as stored before"')
    await app.drain(queues=["b"])
    await app.drain(queues=["c"])
    assert await flow.result(timeout=10) == [
        ["as stored before", "late"],
        ["as stored before", "late"],
    ]


async def old_layout(app: skiplock.App, parent: int, copy: str) -> None:
    """The parent's resolved edges as an older skiplock left them: the result on each edge,
    none kept apart."""
    backend: Any = await app.backend()
    statements = [
        "UPDATE {s}skiplock_deps SET parent_result = {v} WHERE parent_id = {p}",
        "DELETE FROM {s}skiplock_parent_results WHERE parent_id = {p}",
    ]
    if hasattr(backend, "pool"):
        for q in statements:
            s = f'"{backend.schema}".'
            await backend.pool.execute(q.format(s=s, v=f"'{copy}'::jsonb", p=parent))
        return
    with sqlite3.connect(app.url.removeprefix("sqlite:///")) as conn:
        for q in statements:
            conn.execute(q.format(s="", v=f"'{copy}'", p=parent))
