"""The claim's plan: on the pending-only index, in its order, whatever the table holds."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

import skiplock
from skiplock._backends import flows
from skiplock._backends.claim_rules import AGING_LEVELS, keys_to_visit
from skiplock._backends.params import ClaimParams, JobInsertManyParams
from skiplock._backends.postgres.rows import insert_params
from skiplock._backends.postgres.storage.generations import GEN_FIRST
from skiplock._backends.sqlite.statements import STATEMENTS as sqlite_sql
from skiplock._backends.sqlite.statements import job_get_available_in_queues
from skiplock._backends.sqlite.storage import history as sqlite_history
from skiplock._job import NewJob

from ..helpers import SQLITE_UNDO_KEYS, migrations_from, pg_schema_at, server_url
from .helpers import keyed_claim_walk, migrated_pg


async def history_scans(pg: Migrated, plan: str) -> list[str]:
    """The whole reads in ``plan`` of a partition holding more than 10,000 rows (where these
    tests put their million finished ones): what no read may do. A sequential scan of a
    small partition (the live rows, the dead ones, the empty days ahead) is the planner's
    choice for it, and O(its rows)."""
    big = await pg.conn.fetch(
        f"""SELECT tableoid::regclass::text AS name FROM {pg.table}
            GROUP BY 1 HAVING count(*) > 10000"""
    )
    names = {r["name"].rsplit(".", 1)[-1] for r in big}
    return [line for line in plan.splitlines() if any(f"Seq Scan on {n} " in line for n in names)]


def claim_of(queues: tuple[str, ...] | None, limit: int) -> ClaimParams:
    return ClaimParams(queues, limit, "w", "t", default_lease=60.0, lease_margin=5.0)


class Migrated:
    """A migrated PostgreSQL schema, its app, and another session to read plans on."""

    def __init__(self, app: skiplock.App, schema: str, conn: asyncpg.Connection) -> None:
        self.app, self.schema, self.conn = app, schema, conn
        self.table = f'"{schema}".skiplock_jobs'

    async def sql(self, name: str) -> str:
        statements = (await self.app.backend())._sql  # type: ignore[attr-defined]
        return str(getattr(statements, name))

    async def claim_args(self, queues: list[str] | None, limit: int) -> list[Any]:
        """A claim's arguments as the backend binds them (no hand-counted $n positions), its
        lane last."""
        backend: Any = await self.app.backend()
        params = claim_of(None if queues is None else tuple(queues), limit)
        return [*backend._claim_args(params, None), False, params.lane]

    async def explain(self, statement: str, *args: Any, conn: Any = None) -> str:
        rows = await (conn or self.conn).fetch("EXPLAIN " + statement, *args)
        return "\n".join(r[0] for r in rows)


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[Migrated]:
    async with migrated_pg(pg_url) as (app, schema, conn):
        yield Migrated(app, schema, conn)


@pytest.mark.slow
async def test_the_claim_reads_only_the_live_partition_with_a_million_finished_rows(
    pg: Migrated,
) -> None:
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, state, max_attempts, attempt, finished_at)
            SELECT 'default', 'old', 'succeeded', 3, 1, now() FROM generate_series(1, 1000000)"""
    )
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, max_attempts)
            SELECT 'default', 'new', 3 FROM generate_series(1, 100)"""
    )
    await pg.conn.execute(f"ANALYZE {pg.table}")
    # EXPLAIN without ANALYZE plans the claim without running it.
    args = await pg.claim_args(None, 10)
    plan = await pg.explain(await pg.sql("JOB_GET_AVAILABLE"), *args)
    assert "skiplock_jobs_live" in plan, plan
    assert "skiplock_jobs_done" not in plan and "skiplock_jobs_dead" not in plan, plan


async def test_all_queues_claim_keeps_the_index_order_when_statistics_lag_a_flood(
    pg: Migrated,
) -> None:
    """Statistics taken while the table was empty; then a flood. The claim must not sort it.

    Planned on an ordinary session from such statistics, the claim reads every pending row
    and sorts them (43 ms a claim at 100,000 pending, measured). The all-queues claim runs on
    sessions that price sorting out, so it walks the pending index in order and stops at its
    LIMIT whatever the statistics say.
    """
    backend = await pg.app.backend()
    await pg.conn.execute(f"ANALYZE {pg.table}")  # empty
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, max_attempts)
            SELECT 'default', 'flood', 3 FROM generate_series(1, 5000)"""
    )
    claim = await pg.sql("JOB_GET_AVAILABLE")
    args = await pg.claim_args(None, 100)
    ordinary = await pg.explain(claim, *args)
    async with backend._claim_pool.acquire() as claimer:  # type: ignore[attr-defined]
        plan = await pg.explain(claim, *args, conn=claimer)
    jobs = await backend.job_get_available(claim_of(None, 100))
    # a Sort node (a Merge Append of the live segments' ordered scans sorts nothing)
    assert "Sort  (" in ordinary, f"the stale-statistics plan this test guards against:\n{ordinary}"
    assert re.search(r"Index Scan using skiplock_jobs_live_s\d+_pending_idx", plan), plan
    assert "Sort  (" not in plan, plan
    assert len(jobs) == 100 and all(j.task == "flood" for j in jobs)


async def test_a_few_outcomes_are_planned_at_each_call_after_a_flood(
    pg: Migrated,
) -> None:
    """A batch of a few outcomes (an idle worker's, a chain's link) is written on a session of
    its own, planned at each call, never on a generic plan: PostgreSQL 15.20 crashed in the
    generic plan's pruning of the live segments once a generation had been detached since it
    was made (issue 44, docs/design.md). A larger batch goes to the other outcome sessions.
    Both right through a 20,000-job flood the statistics have not seen."""
    backend: Any = await pg.app.backend()
    await pg.conn.execute(f"ANALYZE {pg.table}")  # empty
    await backend.job_insert_many(
        JobInsertManyParams([NewJob("t", "default", "[]", "{}", 0, 3) for _ in range(20000)])
    )
    from skiplock._job import Completion, Disposition

    statement = await pg.sql("JOB_SET_STATE_AND_RELEASE")
    for _ in range(6):  # past the five custom plans after which a session may go generic
        jobs = await backend.job_get_available(claim_of(None, 2))
        done = [
            Completion(j.id, j.lease_token, Disposition.SUCCEED, segment=j.segment) for j in jobs
        ]
        assert sorted(await backend.job_set_state_if_running_many(done)) == [j.id for j in jobs]
    async with backend._by_id_small_pool.acquire() as small:
        used = await small.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
            statement,
        )
    assert used["custom_plans"] >= 6 and used["generic_plans"] == 0, dict(used)
    # and a batch past the small ones is written on the custom plan's sessions (another
    # statement: the release follows it)
    jobs = await backend.job_get_available(claim_of(None, 50))
    done = [Completion(j.id, j.lease_token, Disposition.SUCCEED, segment=j.segment) for j in jobs]
    assert len(await backend.job_set_state_if_running_many(done)) == 50
    async with backend._by_id_small_pool.acquire() as small:
        again = await small.fetchval(
            "SELECT custom_plans FROM pg_prepared_statements WHERE statement = $1", statement
        )
    assert again == used["custom_plans"]


async def test_queue_claims_and_depth_counts_use_the_queue_index_when_statistics_lag_a_flood(
    pg: Migrated,
) -> None:
    """The same stale statistics, for workers limited to some queues and for a bounded queue's
    depth count: each walks the per-queue pending index (the flooded queue in order, stopping
    at the LIMIT) and none reads the whole table or sorts a whole queue."""
    await pg.conn.execute(f"ANALYZE {pg.table}")  # empty
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, max_attempts, priority)
            SELECT 'default', 'flood', 3, n % 3 FROM generate_series(1, 5000) n
            UNION ALL SELECT 'rare', 'rare', 3, 0 FROM generate_series(1, 20)"""
    )
    plans = {}
    claim = await pg.sql("JOB_GET_AVAILABLE_IN_QUEUES")
    backend = await pg.app.backend()
    await backend.job_get_available(claim_of(("none",), 1))  # opens the claim sessions
    for queues in (["default"], ["rare"], ["rare", "default"]):
        args = await pg.claim_args(queues, 100)
        async with backend._claim_pool.acquire() as claimer:  # type: ignore[attr-defined]
            plans[",".join(queues)] = await pg.explain(claim, *args, conn=claimer)
    await pg.app.set_queue_limits("default", max_depth=1_000_000)

    @pg.app.task(name="flood")
    def flood() -> None:
        pass

    args = tuple(insert_params([flood.prepare()], "skiplock", None))
    plans["depth"] = await pg.explain(await pg.sql("JOB_INSERT_MANY"), *args)
    jobs = await (await pg.app.backend()).job_get_available(claim_of(("default",), 100))
    # the flood is in one segment (the one of its statement's second); the others are empty,
    # and the planner may read an empty table whole
    segment = await pg.conn.fetchval(f"SELECT DISTINCT segment FROM {pg.table}")
    flooded = f"skiplock_jobs_live_s{segment}"
    for name, plan in plans.items():
        assert f"{flooded}_queue_pending_idx" in plan, (name, plan)
        assert f"Seq Scan on {flooded} " not in plan, (name, plan)
        assert "Sort Key: skiplock_jobs." not in plan, (name, plan)  # a whole queue sorted
        # the sort of the queues' heads, priced out, must not make the plan worth compiling
        # (JIT took 620 ms a claim of 4 jobs)
        assert "JIT" not in plan, (name, plan)
    assert len(jobs) == 100 and {j.priority for j in jobs} == {2}


@pytest.mark.parametrize("pooled", [False, True], ids=["sessions", "pooler"])
async def test_a_limited_queues_claim_keeps_the_index_order_when_statistics_lag_a_flood(
    pg_url: str, pooled: bool
) -> None:
    """A queue with max_running claims through the limited claim's flow, in a transaction of
    its own; its claim statement is the queue-restricted one, so it must run where sorts are
    priced out as well (the claim sessions, or SET LOCAL behind a pooler). The plan is read
    on the claim's own connection, inside its transaction, just before the claim runs."""
    url = pg_url.replace("schema=", "pooler=transaction&schema=") if pooled else pg_url
    async with migrated_pg(url) as (app, schema, conn):
        table = f'"{schema}".skiplock_jobs'
        await conn.execute(f"ANALYZE {table}")  # empty
        await conn.execute(
            f"""INSERT INTO {table} (queue, task, max_attempts, priority)
                SELECT 'capped', 'flood', 3, n % 3 FROM generate_series(1, 5000) n"""
        )
        await app.set_queue_limits("capped", max_running=1000)
        backend: Any = await app.backend()
        plans: list[str] = []
        answers = backend._answers

        def spying(claim_conn: Any) -> Any:
            real = answers(claim_conn)

            async def answer(step: object) -> Any:
                if isinstance(step, flows.ClaimFromQueue):
                    args = [*real.claim_args(step.params, step.queue), True, "default"]
                    statement = real.sql.JOB_GET_AVAILABLE_IN_QUEUES
                    rows = await claim_conn.fetch("EXPLAIN " + statement, *args)
                    plans.append("\n".join(r[0] for r in rows))
                return await real(step)

            return answer

        backend._answers = spying
        jobs = await backend.job_get_available_limited(claim_of(("capped",), 100))
    assert len(plans) == 1 and len(jobs) == 100, (plans, len(jobs))
    assert "_queue_pending_idx" in plans[0], plans[0]
    assert "Sort Key: skiplock_jobs." not in plans[0], plans[0]  # the whole queue sorted
    assert "JIT" not in plans[0], plans[0]
    assert {j.priority for j in jobs} == {2}


async def test_an_aging_queues_claim_reads_each_priority_on_the_index_when_statistics_lag(
    pg: Migrated,
) -> None:
    """The aged claim (priority aging) under the statistics of an empty table and a flood of
    5,000 jobs over three priorities: a probe per priority of the per-queue pending index,
    each stopping at the batch; only those few rows are ranked, never the queue read whole
    or sorted. Planned where the claim runs: the claim sessions (sorts priced out)."""
    await pg.conn.execute(f"ANALYZE {pg.table}")  # empty
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, max_attempts, priority, run_at)
            SELECT 'aged', 'flood', 3, n % 3, now() - n * interval '1 second'
            FROM generate_series(1, 5000) n"""
    )
    await pg.app.set_queue_limits("aged", aging_s=600.0)
    backend: Any = await pg.app.backend()
    await backend.job_get_available(claim_of(("none",), 1))  # opens the claim sessions
    args = await pg.claim_args(["aged"], 100)
    aged = ["aged", *args[1:7], 600.0, AGING_LEVELS, "default"]
    async with backend._claim_pool.acquire() as claimer:
        plan = await pg.explain(await pg.sql("JOB_GET_AVAILABLE_AGED"), *aged, conn=claimer)
    jobs = await backend.job_get_available_limited(claim_of(("aged",), 100))
    segment = await pg.conn.fetchval(f"SELECT DISTINCT segment FROM {pg.table}")
    flooded = f"skiplock_jobs_live_s{segment}"
    assert f"{flooded}_queue_pending_idx" in plan, plan
    assert f"Seq Scan on {flooded} " not in plan, plan
    assert "Sort Key: skiplock_jobs." not in plan, plan  # a whole queue sorted
    assert "JIT" not in plan, plan
    # job n (its id) is of priority n % 3 and waited n seconds: ranked by the rule, the best
    # 100 are priority 2 then 1 of the oldest (2 + 8 and 1 + 8), no fresher priority 2
    rule = sorted(range(1, 5001), key=lambda n: (-(n % 3 + n // 600), -n))
    assert sorted(j.id for j in jobs) == sorted(rule[:100])


async def test_a_version_3_schema_with_jobs_in_it_upgrades_to_the_queue_index(
    pg_url: str,
) -> None:
    """Migration 4 on a populated table: the worker refuses the old schema, ``migrate``
    swaps the index (and the later migrations partition the table), and the jobs queued
    before it are claimed through it."""
    await pg_schema_at(pg_url, 3)
    schema = pg_url.rsplit("schema=", 1)[1]
    conn = await asyncpg.connect(server_url(pg_url))
    app = skiplock.App(pg_url)
    try:
        await conn.execute(
            f"""INSERT INTO "{schema}".skiplock_jobs (queue, task, max_attempts)
                SELECT 'a', 'queued-before', 3 FROM generate_series(1, 30)"""
        )
        with pytest.raises(skiplock.SchemaError, match="skiplock migrate"):
            await app.check_schema()
        assert await app.migrate() == migrations_from(pg_url, 4)
        await app.check_schema()
        indexes = await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY 1", schema
        )
        jobs = await (await app.backend()).job_get_available(claim_of(("a",), 50))
        names = [r["indexname"] for r in indexes]
        assert "skiplock_jobs_queue_pending_idx" in names
        assert "skiplock_jobs_live_queue_idx" not in names
        assert len(jobs) == 30
    finally:
        await conn.close()
        await app.close()


async def test_sqlite_queue_claims_walk_each_queue_in_order(sqlite_url: str) -> None:
    """SQLite (no LATERAL): one branch per named queue, each a search of the per-queue index
    in claim order; only the merged few are sorted. Upgrading a version 3 file swaps the index
    under the jobs already in it."""
    app = skiplock.App(sqlite_url)
    await app.migrate()
    path = sqlite_url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("DROP VIEW skiplock_jobs")
        for statement in SQLITE_UNDO_KEYS:
            conn.execute(statement)
        conn.executescript(
            """ALTER TABLE skiplock_jobs_live RENAME TO skiplock_jobs;
               DROP INDEX skiplock_jobs_queue_pending_idx;
               CREATE INDEX skiplock_jobs_live_queue_idx ON skiplock_jobs (queue, state)
                   WHERE state IN ('pending', 'running');
               ALTER TABLE skiplock_jobs DROP COLUMN started_at;
               ALTER TABLE skiplock_jobs DROP COLUMN result;
               ALTER TABLE skiplock_jobs DROP COLUMN progress;
               DROP INDEX skiplock_jobs_reclaimed_idx;
               ALTER TABLE skiplock_jobs DROP COLUMN ready_at;
               ALTER TABLE skiplock_jobs DROP COLUMN run_s;
               ALTER TABLE skiplock_jobs DROP COLUMN reclaims;
               ALTER TABLE skiplock_jobs DROP COLUMN reclaimed_at;
               ALTER TABLE skiplock_jobs DROP COLUMN trace_context;
               ALTER TABLE skiplock_jobs DROP COLUMN payload_version;
               DROP TABLE skiplock_workers;
               DROP TABLE skiplock_audit;
               DELETE FROM skiplock_migrations WHERE version >= 4;"""
        )
        conn.executemany(
            "INSERT INTO skiplock_jobs (queue, task, max_attempts, run_at, created_at) "
            "VALUES (?, 'queued-before', 3, 0, 0)",
            [("a",)] * 30 + [("b",)] * 5,
        )
        conn.close()
        assert await app.migrate() == migrations_from(sqlite_url, 4)
        conn = sqlite3.connect(path)  # a session that knows the new schema
        claim = job_get_available_in_queues(2)
        args = {"now": 1.0, "worker": "w", "token": "t", "default_lease": 1.0, "margin": 1.0}
        args |= {"limit": 10, "limited": False, "q0": "a", "q1": "b", "lane": "default"}
        plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + claim, args)]
        jobs = await (await app.backend()).job_get_available(claim_of(("b", "a"), 50))
    finally:
        conn.close()
        await app.close()
    # each queue's unkeyed jobs of the lane (the index's third term: keyed or not), in order
    index = "INDEX skiplock_jobs_queue_pending_idx (lane=? AND queue=? AND <expr>=?)"
    searches = [p for p in plan if index in p]
    assert len(searches) == 2, "\n".join(plan)
    assert sum("TEMP B-TREE" in p for p in plan) == 1, "\n".join(plan)  # the merge only
    assert not any(p.startswith("SCAN skiplock_jobs") for p in plan), "\n".join(plan)
    assert len(jobs) == 35


STATS = (
    "JOB_STATS_LIVE",
    "JOB_STATS_FINISHED",
    "JOB_STATS_RECLAIMS",
    "JOB_STATS_PERCENTILES",
)
"""Every statement of a health-numbers reading (``app.stats()``)."""

PG_STATS = (*STATS, "JOB_STATS_WAITING", "JOB_STATS_RECLAIMS_REST", "JOB_STATS_PERCENTILES_REST")
"""PostgreSQL's reading, which reads the rest (history, dead and waiting jobs) apart from the
live partition (postgres_reads.py)."""


@pytest.mark.slow
async def test_the_health_numbers_read_no_history_at_a_million_finished_rows(
    pg: Migrated,
) -> None:
    """A million rows finished a day ago, a few live and recent ones: each statement of a
    reading walks partial indexes (the window's range of the finished one), never the table,
    and the reading itself counts only the recent rows."""
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, state, max_attempts, attempt, finished_at,
                                    attempted_at, ready_at, run_s)
            SELECT 'default', 'old', 'succeeded', 3, 1, now() - interval '1 day',
                   now() - interval '1 day', now() - interval '1 day', 0.1
            FROM generate_series(1, 1000000)"""
    )
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, state, max_attempts, attempt, finished_at,
                                    attempted_at, ready_at, run_s)
            SELECT 'default', 'new', 'succeeded', 3, 1, now(), now(), now(), 0.1
            FROM generate_series(1, 50);
            INSERT INTO {pg.table} (queue, task, max_attempts)
            SELECT 'default', 'new', 3 FROM generate_series(1, 100)"""
    )
    await pg.conn.execute(f"ANALYZE {pg.table}")
    now = await pg.conn.fetchval("SELECT now()")
    args = (now, now - timedelta(seconds=300), None, None)
    for name in PG_STATS:
        plan = await pg.explain(await pg.sql(name), *args)
        assert not await history_scans(pg, plan), (name, plan)
        assert "skiplock_jobs_" in plan, (name, plan)
        if name.startswith("JOB_STATS_PERCENTILES"):  # buckets, not every sample ranked
            assert "WindowAgg" not in plan, plan
            sorted_rows = [int(n) for n in re.findall(r"Sort  \(cost=\S+ rows=(\d+)", plan)]
            assert all(n <= 100 for n in sorted_rows), plan  # a sort of the window's rows
    stats = await pg.app.stats(window_s=300)
    assert (stats.total.completed, stats.total.ready) == (50, 100)


async def sqlite_with_history(sqlite_url: str, insert: str) -> sqlite3.Connection:
    """A migrated SQLite file holding the finished rows ``insert`` writes, analysed, and a
    connection to read plans on (the caller closes it)."""
    app = skiplock.App(sqlite_url)
    await app.migrate()
    await app.close()
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    conn.executescript(f"BEGIN; {insert}; COMMIT; ANALYZE;")
    return conn


def assert_reads_no_history(
    name: str, statement: str, args: dict[str, Any], conn: sqlite3.Connection, jobs: set[str]
) -> list[str]:
    """Every read of the jobs table (named so, or by an alias in ``jobs``) in the plan is a
    SEARCH or a whole scan of a live-only partial index; returns those reads."""
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + statement, args)]
    jobs = jobs | {"skiplock_jobs_live"}  # the live jobs' table under the view (migration 11)
    # the view's rows, produced by a co-routine whose branches are the reads checked here
    views = {p.split()[1] for p in plan if p.startswith("CO-ROUTINE")}
    reads = [
        p
        for p in plan
        if len(p.split()) > 1 and p.split()[1] in jobs - views and not p.startswith("CO-ROUTINE")
    ]
    live = ("pending_idx", "queue_pending_idx", "lease_idx", "waiting_idx")
    for read in reads:
        partial = read.startswith("SCAN") and read.endswith(live)
        assert read.startswith("SEARCH") or partial, (name, read, plan)
    return reads


@pytest.mark.slow
async def test_sqlite_health_numbers_read_no_history_at_a_million_finished_rows(
    sqlite_url: str,
) -> None:
    conn = await sqlite_with_history(
        sqlite_url,
        """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
           INSERT INTO skiplock_jobs_live (queue, task, state, max_attempts, attempt, run_at,
                                      created_at, finished_at, attempted_at, ready_at, run_s)
           SELECT 'default', 'old', 'succeeded', 3, 1, 0, 0, 1000, 1000, 1000, 0.1 FROM n""",
    )
    # and 300,000 of them in a day's table, as completions move them (the rest stay in the
    # live table, as an upgrade leaves them)
    conn.execute("BEGIN IMMEDIATE")
    day = sqlite_history.ensure_day(conn, sqlite_history.day_of(1000))
    conn.execute(f"INSERT INTO {day} SELECT * FROM skiplock_jobs_live WHERE id <= 300000")
    conn.execute("DELETE FROM skiplock_jobs_live WHERE id <= 300000")
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    try:
        args = {"now": 1e9, "since": 1e9 - 300, "queue": None, "task": None}
        for name in STATS:
            statement = getattr(sqlite_sql, name)
            reads = assert_reads_no_history(name, statement, args, conn, {"skiplock_jobs", day})
            if name not in ("JOB_STATS_NOW", "JOB_STATS_LIVE"):  # the windows of finishes
                assert any(day in r for r in reads), (name, reads)
            plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + statement, args)]
            if name == "JOB_STATS_PERCENTILES":  # streamed to the buckets: nothing sorted
                assert not any("TEMP B-TREE" in p for p in plan), plan
    finally:
        conn.close()


@pytest.mark.slow
async def test_a_keyset_page_seeks_to_its_first_row_at_a_million_rows(pg: Migrated) -> None:
    """The Jobs page's "older" link: a backward walk of each partition's id index from the
    given id, merged (no sort), in the custom plan and in the generic one a prepared
    statement settles on."""
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, state, max_attempts, attempt, finished_at)
            SELECT 'default', 'old', 'succeeded', 3, 1, now() FROM generate_series(1, 1000000)"""
    )
    await pg.conn.execute(f"ANALYZE {pg.table}")
    statement = await pg.sql("JOB_LIST")
    args = [None] * 8 + [51, 500_000]  # state, ids..last_error, limit, before
    for mode in ("force_custom_plan", "force_generic_plan"):
        await pg.conn.execute(f"SET plan_cache_mode = {mode}")
        plan = await pg.explain(statement, *args)
        assert re.search(r"Index Scan Backward using skiplock_jobs_done_p\d+_id_idx", plan), plan
        assert "Index Cond: (id <" in plan, (mode, plan)
        assert not await history_scans(pg, plan) and "Sort  (" not in plan, (mode, plan)


async def test_sqlite_a_keyset_page_seeks_to_its_first_row(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)
    await app.migrate()
    await app.close()
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    conn.create_function("skiplock_lower", 1, str.lower)
    try:
        filters = ("ids", "task", "queue", "error", "since", "until", "last_error")
        args = dict.fromkeys(("state", *filters))
        args |= {"limit": 51, "before": 500_000}
        plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sqlite_sql.JOB_LIST, args)]
        assert any("INTEGER PRIMARY KEY (rowid<?)" in p for p in plan), plan
        assert not any("TEMP B-TREE" in p for p in plan), plan  # no sort: the key's order
    finally:
        conn.close()


@pytest.mark.slow
async def test_queue_counts_read_no_history_at_a_million_finished_rows(pg: Migrated) -> None:
    """``queues()`` and ``queue_info()``: the live partition only, never the history (a
    DISTINCT over the live states of one table read all of it, and cost enough to be
    JIT-compiled: ~0.6 s at 210,000 rows)."""
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, state, max_attempts, attempt, finished_at)
            SELECT 'q' || (g % 5), 'old', 'succeeded', 3, 1, now()
            FROM generate_series(1, 1000000) g;
            INSERT INTO {pg.table} (queue, task, max_attempts)
            SELECT 'q' || (g % 3), 'new', 3 FROM generate_series(1, 1000) g;
            INSERT INTO {pg.table} (queue, task, state, max_attempts, attempt,
                                    lease_expires_at, started_at)
            SELECT 'q1', 'new', 'running', 3, 1, now() + interval '1 hour', now()
            FROM generate_series(1, 20)"""
    )
    await pg.conn.execute(f"ANALYZE {pg.table}")
    for name, args in (("QUEUE_LIST", ()), ("QUEUE_INFO", ("q1",))):
        plan = await pg.explain(await pg.sql(name), *args)
        assert "skiplock_jobs_live" in plan, (name, plan)
        assert "skiplock_jobs_done" not in plan and "skiplock_jobs_dead" not in plan, plan
        assert "JIT" not in plan, (name, plan)
    listed = {q.name: (q.pending, q.running) for q in await pg.app.queues()}
    assert listed == {"q0": (333, 0), "q1": (334, 20), "q2": (333, 0)}
    assert (await pg.app.queue_info("q1")).running == 20


async def test_sqlite_queue_counts_read_no_history(sqlite_url: str) -> None:
    conn = await sqlite_with_history(
        sqlite_url,
        """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
           INSERT INTO skiplock_jobs_live (queue, task, state, max_attempts, attempt, run_at,
                                      created_at, finished_at)
           SELECT 'q' || (i % 5), 'old', 'succeeded', 3, 1, 0, 0, 1000 FROM n""",
    )
    try:
        for name in ("QUEUE_LIST", "QUEUE_INFO"):
            statement = getattr(sqlite_sql, name)
            # the table, or its alias in the per-queue subqueries
            reads = assert_reads_no_history(
                name, statement, {"queue": "q1"}, conn, {"skiplock_jobs", "j"}
            )
            assert reads, (name, statement)
    finally:
        conn.close()


async def assert_the_walk_probes_its_index(pg: Migrated, queues: list[str] | None) -> None:
    """skiplock_key_walk's 32 steps read the walk index, a probe each, never the segment's
    table whole (its plans are inside the function, so counted, not explained)."""
    leaf = "skiplock_jobs_live_keyed"
    async with pg.conn.transaction():
        pairs = await pg.conn.fetch(
            f'SELECT * FROM "{pg.schema}".skiplock_key_walk(NULL, NULL, $1, 32, $2)',
            queues,
            "default",
        )
        scans = await pg.conn.fetchrow(
            "SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables"
            " WHERE schemaname = $1 AND relname = $2",
            pg.schema,
            leaf,
        )
        walk = await pg.conn.fetchval(
            "SELECT pg_stat_get_xact_numscans($1::regclass)", f'"{pg.schema}".{leaf}_walk_idx'
        )
    assert len(pairs) == 32 and [p["pos"] for p in pairs] == list(range(1, 33))
    assert scans["seq_scan"] == 0 and walk >= 32, (scans, walk)


async def keyed_args(pg: Migrated, queues: list[str] | None, limit: int) -> list[Any]:
    """The keyed claim's arguments as postgres_ops.claim_keyed binds them (no cursor)."""
    *claim, lane = await pg.claim_args(queues, limit)
    return [*claim, None, None, keys_to_visit(limit), lane]


async def test_the_ordinary_claims_never_read_the_keyed_segment(pg: Migrated) -> None:
    """The keyed segment is pruned from the ordinary claims' plans: a keyed backlog costs
    them nothing (postgres_keys_sql.py)."""
    for name, queues in [("JOB_GET_AVAILABLE", None), ("JOB_GET_AVAILABLE_IN_QUEUES", ["a"])]:
        plan = await pg.explain(await pg.sql(name), *await pg.claim_args(queues, 10))
        assert f"skiplock_jobs_live_s{GEN_FIRST}" in plan, plan
        assert "skiplock_jobs_live_keyed" not in plan, (name, plan)


@pytest.mark.slow
async def test_the_keyed_claim_reads_no_table_whole_at_a_million_jobs_of_10000_keys(
    pg: Migrated,
) -> None:
    """A million ready keyed jobs over 10,000 keys (one hot key of 100,000 among them, and a
    thousand ordered keys, with dead jobs holding some): both keyed claims walk the keys by
    index probes and read each key's jobs (an ordered key's head, its dead jobs) through
    indexes, never a whole table, and so does the burst's ready probe; and they take jobs."""
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, max_attempts, concurrency_key, key_limit,
                                    key_order, segment)
            SELECT 'default', 't', 3, k, CASE WHEN o THEN 1 ELSE 2 END,
                   CASE WHEN o THEN 'block' END, 4
            FROM (SELECT CASE WHEN g <= 100000 THEN 'hot' ELSE 'k' || (g % 10000) END AS k,
                         g > 100000 AND g % 10000 < 1000 AS o
                  FROM generate_series(1, 1000000) g) s"""
    )
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, max_attempts, concurrency_key, key_limit,
                                    key_order, state, finished_at, segment)
            SELECT 'default', 't', 3, 'k' || g, 1, 'block', 'dead', now(), 4
            FROM generate_series(1, 999, 7) g
            UNION ALL  -- and the dead of other jobs, as a history of dead letters holds
            SELECT 'default', 't', 3, NULL, NULL, NULL, 'dead', now(), 3
            FROM generate_series(1, 200000)"""
    )
    await pg.conn.execute(f"ANALYZE {pg.table}")
    # the statement inside skiplock_keyed_claim (an EXPLAIN of the call shows the call alone)
    body = keyed_claim_walk()
    body = body.replace("{s}", f'"{pg.schema}"')
    for queues in (None, ["default", "other"]):
        async with pg.conn.transaction():  # under the settings of the function it runs in
            await pg.conn.execute(
                "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;"
                " SET LOCAL jit = off"
            )
            plan = await pg.explain(body, *await keyed_args(pg, queues, 20))
        whole = [line for line in plan.splitlines() if "Seq Scan on skiplock_jobs" in line]
        assert whole == [], (queues, plan)  # (the few settings rows are read whole, as ever)
        for index in ("_walk_idx", "_head_idx", "skiplock_jobs_dead_blocking_idx"):
            assert index in plan, (queues, index, plan)
        await assert_the_walk_probes_its_index(pg, queues)
    ready = await pg.explain(await pg.sql("JOB_READY_EXISTS"), None, None, "default")
    for big in ("skiplock_jobs_live_keyed", "skiplock_jobs_dead"):  # (the ring is empty)
        assert f"Seq Scan on {big}" not in ready, ready
    jobs = await (await pg.app.backend()).job_get_available_keyed(claim_of(None, 20))
    assert len(jobs) == 20


async def test_the_keyed_claim_runs_its_function_only_while_a_keyed_job_is_pending(
    pg: Migrated,
) -> None:
    """A worker runs the keyed claim every round that left room, whether anyone uses keys or
    not: with no pending keyed job its one-time filter skips the function (a round's 330 us
    down to 80), and with one it runs and claims it. Running jobs alone leave it skipped."""
    statement = await pg.sql("JOB_GET_AVAILABLE_KEYED")
    args = await keyed_args(pg, None, 20)

    async def function_ran() -> bool:
        tx = pg.conn.transaction()
        await tx.start()
        try:
            rows = await pg.conn.fetch("EXPLAIN (ANALYZE, COSTS OFF) " + statement, *args)
        finally:
            await tx.rollback()  # what the ANALYZE claimed goes back
        scan = [r[0] for r in rows if "Function Scan" in r[0]]
        assert len(scan) == 1, rows
        return "never executed" not in scan[0]

    assert not await function_ran()  # nothing keyed at all
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, max_attempts, concurrency_key, segment)
            VALUES ('default', 't', 3, 'k', 4)"""
    )
    assert await function_ran()
    jobs = await (await pg.app.backend()).job_get_available_keyed(claim_of(None, 20))
    assert len(jobs) == 1  # now running: nothing keyed is pending
    assert not await function_ran()
    assert await (await pg.app.backend()).job_get_available_keyed(claim_of(None, 20)) == []


async def test_a_keyed_claim_reads_a_few_index_pages_a_key_before_any_analyze(
    pg: Migrated,
) -> None:
    """20,000 one-job keys just enqueued, the segment never analyzed: a claim of 10 reads a
    few index pages a key it visits (32 of them), never a whole index: its lock and update of
    the ids it chose go by primary key. (Planned without statistics, the lock walked the whole
    walk index for its 10 ids, 1,750 pages: 11 ms a claim, where the same claim reads 290
    pages in 1.6 ms, and 20,000 one-job keys took 13 s to drain where unkeyed jobs took 2.)"""
    await pg.conn.execute(
        f"""INSERT INTO {pg.table} (queue, task, max_attempts, concurrency_key, segment)
            SELECT 'default', 't', 3, 'k' || lpad(g::text, 6, '0'), 4
            FROM generate_series(1, 20000) g"""
    )
    args = await keyed_args(pg, None, 10)
    pages = """SELECT sum(pg_stat_get_xact_blocks_fetched(indexrelid)) FROM pg_index
               WHERE indrelid = $1::regclass"""
    leaf = f'"{pg.schema}".skiplock_jobs_live_keyed'
    for _ in range(3):  # the function's plan is made at its first call, then kept
        async with pg.conn.transaction():
            before = await pg.conn.fetchval(pages, leaf)
            taken = await pg.conn.fetch(await pg.sql("JOB_GET_AVAILABLE_KEYED"), *args)
            read = await pg.conn.fetchval(pages, leaf) - before
        assert len(taken) == 10 and read <= 16 * keys_to_visit(10), read


async def test_sqlite_keyed_claim_searches_its_indexes(sqlite_url: str) -> None:
    """SQLite's walk (one search a pair), its pick (each key's jobs, its running count) and
    the ordinary claim (unkeyed jobs only) all search an index, never scan the table."""
    app = skiplock.App(sqlite_url)
    await app.migrate()
    backend = await app.backend()
    jobs = [new_job_keyed(f"k{n % 50}") for n in range(500)]
    await backend.job_insert_many(JobInsertManyParams(jobs))
    await app.close()
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    try:
        conn.execute("ANALYZE")
        pairs = '[["default", "k1", 1], ["default", "k2", 2]]'
        reads = [
            (sqlite_sql.NEXT_PAIR, {"queue": "", "key": "", "lane": "default"}),
            (sqlite_sql.NEXT_KEY_IN_QUEUE, {"queue": "default", "key": "k1", "lane": "default"}),
            (
                sqlite_sql.PICK,
                {"pairs": pairs, "now": 1e10, "limit": 5, "limited": False, "lane": "default"},
            ),
        ]
        for statement, args in reads:
            plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + statement, args)]
            scans = [p for p in plan if p.startswith("SCAN skiplock_jobs_live")]
            assert scans == [], "\n".join(plan)
        claim = sqlite_sql.JOB_GET_AVAILABLE
        args = {"now": 1.0, "worker": "w", "token": "t", "default_lease": 1.0, "margin": 1.0}
        plan = [
            r[3]
            for r in conn.execute(
                "EXPLAIN QUERY PLAN " + claim,
                args | {"limit": 5, "limited": False, "lane": "default"},
            )
        ]
        assert any("skiplock_jobs_pending_idx (lane=? AND <expr>=?)" in p for p in plan), "\n".join(
            plan
        )
    finally:
        conn.close()


def new_job_keyed(key: str) -> NewJob:
    return NewJob("t", "default", "[]", "{}", 0, 3, concurrency_key=key, key_limit=2)
