"""The ordinary claims name the live segments they read (postgres/storage/sight.py).

A retired generation whose reader still holds it stays attached as an empty wrapper, and a
plan of the job table expands (and locks) every one; the claims' text names the generations a
new query reads instead, so no waiting wrapper is planned, locked or waited on by a claim. And a
claim whose named set the rotation has outrun (the pointer moved to a generation made after the
set was read) claims the new generation's jobs in the same call.
"""

from __future__ import annotations

import asyncio

import asyncpg

from skiplock._backends.params import ClaimParams, JobInsertManyParams
from skiplock._backends.postgres import statements
from skiplock._backends.postgres.storage import rotation as postgres_rotation
from skiplock._backends.postgres.storage import sight

from .test_storage import (
    current_segment,
    generation_tables,
    job,
    migrated_own,
    own_db,  # noqa: F401 (the fixture)
)


def claim_params(limit: int = 10) -> ClaimParams:
    return ClaimParams(None, limit, "w", "tok", 60.0, 5.0)


async def test_a_claim_never_plans_or_locks_a_generation_waiting_for_its_reader(
    own_db: str,  # noqa: F811
) -> None:
    """Four generations retired under a REPEATABLE READ report wait for it, attached as empty
    wrappers: the claim as it is written (every live segment) locks each of them at planning;
    the claim a backend runs names the generations in sight and locks none of them, and its
    rows and pointer are what they should be."""
    reader = await asyncpg.connect(own_db.split("?")[0])
    async with migrated_own(own_db) as (schema, backend, conn):
        await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        for _ in range(6):
            await reader.fetchval(f'SELECT count(*) FROM "{schema}".skiplock_jobs')
            assert (await backend.rotate_live(0)) is not None
        tables = await generation_tables(conn, schema)
        waiting = {name for name, pending in tables.items() if pending}
        wrappers = {n for n in tables if n.endswith("_p")}
        assert len(waiting) >= 3, tables  # retired, held by the reader
        in_sight = await sight.read_sight(conn, schema)
        pointer = await current_segment(conn, schema)
        assert pointer in in_sight
        assert all(postgres_rotation.segment_name(n) not in waiting for n in in_sight)
        args = [None, 10, "w", "tok", 60.0, 5.0, None, False, "default"]
        every = statements.Statements.for_schema(schema).JOB_GET_AVAILABLE
        named = statements.named_claim(schema, "JOB_GET_AVAILABLE", in_sight)
        held_wrappers = {
            postgres_rotation.wrapper_name(int(n.rsplit("_s", 1)[1]))
            for n in waiting
            if not n.endswith("_p")
        }
        assert held_wrappers <= wrappers
        assert held_wrappers <= await locked_in_transaction(conn, every, *args)
        locked = await locked_in_transaction(conn, named, *args)
        assert not (held_wrappers & locked), locked
        assert {postgres_rotation.segment_name(pointer), "skiplock_jobs_live_long"} <= locked
        # A DDL (a person's, or a rotation's finish) queued on a waiting wrapper behind the
        # reader: every later lock of that wrapper queues behind it, until the reader ends.
        ids = await backend.job_insert_many(JobInsertManyParams([job(), job()]))
        ddl = await asyncpg.connect(own_db.split("?")[0])
        wrapper = sorted(held_wrappers)[0]
        queued = asyncio.create_task(
            ddl.execute(
                f"""SET lock_timeout = '60s'; BEGIN;
                    LOCK TABLE "{schema}".{wrapper} IN ACCESS EXCLUSIVE MODE; ROLLBACK"""
            )
        )
        await await_until_waiting(conn, wrapper)
        claimed = await asyncio.wait_for(backend.job_get_available(claim_params()), 20)
        assert sorted(c.id for c in claimed) == sorted(ids)
        await reader.execute("COMMIT")
        await asyncio.wait_for(queued, 60)
        await ddl.close()
    await reader.close()


async def await_until_waiting(conn: asyncpg.Connection, table: str) -> None:
    """Until some session waits for a lock on ``table``."""
    for _ in range(400):
        waiting = await conn.fetchval(
            """SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
               WHERE c.relname = $1 AND NOT l.granted""",
            table,
        )
        if waiting:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no session came to wait on {table}")


async def locked_in_transaction(
    conn: asyncpg.Connection, statement: str, *args: object
) -> set[str]:
    """The live job tables ``statement`` locks, run in a transaction then rolled back."""
    tx = conn.transaction()
    await tx.start()
    try:
        await conn.fetch(statement, *args)
        rows = await conn.fetch(
            """SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
               WHERE l.pid = pg_backend_pid() AND c.relname LIKE 'skiplock_jobs_live%'"""
        )
        return {r["relname"] for r in rows}
    finally:
        await tx.rollback()


async def test_a_job_in_a_generation_made_after_the_claims_read_their_sight_is_claimed_at_once(
    own_db: str,  # noqa: F811
) -> None:
    """A backend's claims read the generations in sight once, then the rotation moves the
    pointer twice, to a generation that did not exist then, and a job goes there: the next
    claim names the old set, finds the pointer outside it, reads the set again and claims the
    job in the same call (without that, it came back empty and a worker slept a poll)."""
    async with migrated_own(own_db) as (schema, backend, conn):
        assert await backend.job_get_available(claim_params()) == []  # the sight is read
        before = await current_segment(conn, schema)
        for _ in range(3):
            assert (await backend.rotate_live(0)) is not None
        after = await current_segment(conn, schema)
        assert after != before
        named = backend._sight.segments  # type: ignore[attr-defined]
        assert after not in named, (named, after)  # made after the sight was read
        (job_id,) = await backend.job_insert_many(JobInsertManyParams([job()]))
        segment = await conn.fetchval(
            f'SELECT segment FROM "{schema}".skiplock_jobs WHERE id = $1', job_id
        )
        assert segment == after
        claimed = await backend.job_get_available(claim_params())
        assert [c.id for c in claimed] == [job_id]
        assert after in backend._sight.segments  # type: ignore[attr-defined]
