"""Storage operations at size (issue 24): the upgrade to partitioned storage on a 10 M-row table,
and W10, a million finished jobs pruned while a drain runs.

Both on a stock-settings PostgreSQL cluster of the bench's own (benchmarks/cluster.py), never the
machine's shared server (autovacuum off there); W10 on SQLite too, on a file.

- **upgrade**: a version 10 schema (the migrations before partitioned storage) holding
  ``--rows`` jobs: 98 % succeeded over 30 days, 1 % dead, the rest pending, running and keyed;
  migration 11 (partitioned storage) and then ``skiplock migrate`` (12, the live segments) timed
  apart, each one ACCESS EXCLUSIVE lock on the job table.
- **W10 prune**: ``--prune-rows`` jobs finished 10 days ago (PostgreSQL: one day partition; SQLite:
  rows of its one table), then a drain of ``--drain`` fresh jobs by one in-process worker; the prune
  (``app.prune``, the pruner's operation) starts a second into it. Printed: prune time, the drain's
  rate in the second before the prune and during it, and its pickup p99 in each.

    python -m benchmarks.storage_ops [--rows 10000000] [--prune-rows 1000000] [--drain 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

import skiplock
from skiplock import Worker
from skiplock._backends.postgres import statements as postgres_sql
from skiplock._backends.sqlite.storage import history as sqlite_history

from .cluster import create_database, settings, stock_cluster

RESULTS = Path(__file__).parent / "results"


def _schema_sql(body: str) -> str:
    return body.replace("{s}", '"public"')


async def migrations(url: str, first: int, last: int) -> None:
    """Apply migrations ``first`` to ``last`` (1-based, inclusive) as ``skiplock migrate``
    would, in one transaction."""
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute(postgres_sql.Statements.for_schema("public").MIGRATIONS_TABLE)
            for number, name, body in postgres_sql.MIGRATIONS[first - 1 : last]:
                await conn.execute(_schema_sql(body))
                await conn.execute(
                    "INSERT INTO skiplock_migrations (version, name) VALUES ($1, $2)", number, name
                )
    finally:
        await conn.close()


async def version_10(url: str) -> None:
    await migrations(url, 1, 10)


FILL = """
INSERT INTO skiplock_jobs (queue, task, state, max_attempts, attempt, args, run_at, created_at,
                           attempted_at, finished_at, unique_key, unique_succeeded, result,
                           lease_token, lease_expires_at, locked_by)
SELECT 'default', 'bench', s.state, 3, CASE WHEN s.state = 'pending' THEN 0 ELSE 1 END,
       jsonb_build_array(g), t, t, t,
       CASE WHEN s.state IN ('succeeded', 'dead') THEN t END,
       CASE WHEN g % 1000 = 0 THEN 'k' || g END, g % 2000 = 0,
       CASE WHEN s.state = 'succeeded' THEN '1'::jsonb END,
       CASE WHEN s.state = 'running' THEN 'w:' || g END,
       CASE WHEN s.state = 'running' THEN now() + interval '1 hour' END,
       CASE WHEN s.state = 'running' THEN 'w' END
FROM generate_series($1::bigint, $2::bigint) g,
     LATERAL (SELECT CASE WHEN g % 100 = 1 THEN 'dead' WHEN g % 100 = 2 THEN 'pending'
                          WHEN g % 1000 = 3 THEN 'running' ELSE 'succeeded' END AS state,
                     now() - (g % 2592000) * interval '1 second' AS t) s
"""


async def upgrade(admin_url: str, rows: int) -> dict[str, Any]:
    url = await create_database(admin_url, "upgrade")
    await version_10(url)
    conn = await asyncpg.connect(url)
    try:
        step = 1_000_000
        started = time.perf_counter()
        for low in range(1, rows + 1, step):
            await conn.execute(FILL, low, min(low + step - 1, rows))
        await conn.execute("VACUUM ANALYZE skiplock_jobs")
        filled_s = time.perf_counter() - started
        size = await conn.fetchval("SELECT pg_total_relation_size('skiplock_jobs')")
        by_state = dict(await conn.fetch("SELECT state, count(*) FROM skiplock_jobs GROUP BY 1"))
        started = time.perf_counter()
        await migrations(url, 11, 11)  # partitioned storage
        partition_s = time.perf_counter() - started
        app = skiplock.App(url)
        started = time.perf_counter()
        applied = await app.migrate()  # the live segments (12), then the days made ahead
        segments_s = time.perf_counter() - started
        await app.close()
        after = dict(await conn.fetch("SELECT state, count(*) FROM skiplock_jobs GROUP BY 1"))
        keys = await conn.fetchval("SELECT count(*) FROM skiplock_keys")
    finally:
        await conn.close()
    assert applied == [12], applied
    assert after == by_state, (after, by_state)
    return {
        "rows": rows,
        "by_state": by_state,
        "table_bytes": size,
        "fill_s": round(filled_s, 1),
        "migrate_s": round(partition_s + segments_s, 2),
        "migration_11_s": round(partition_s, 2),
        "migration_12_s": round(segments_s, 2),
        "keys": keys,
    }


async def _drain_with_prune(app: skiplock.App, prune_rows: int, drain: int) -> dict[str, Any]:
    done: list[float] = []

    @app.task(name="fresh")
    def fresh() -> None:
        done.append(time.monotonic())

    await app.enqueue_many(fresh.prepare() for _ in range(drain))
    worker = Worker(app, concurrency=50, poll_interval_s=0.01, scheduler=False)
    run = asyncio.create_task(worker.run(burst=True))
    await asyncio.sleep(1.0)
    if run.done() or len(done) >= drain * 0.8:
        raise SystemExit(
            f"the drain of {drain:,} jobs was (nearly) over before the prune: raise --drain"
        )
    prune_from = time.monotonic()
    removed = await app.prune(finished_age_s=7 * 86400.0, dead_age_s=30 * 86400.0, who="bench")
    prune_to = time.monotonic()
    await asyncio.wait_for(run, 600)
    assert removed >= prune_rows, (removed, prune_rows)

    def rate(a: float, b: float) -> float:
        return sum(a <= t < b for t in done) / max(b - a, 1e-9)

    window = max(prune_to - prune_from, 0.5)
    return {
        "removed": removed,
        "prune_s": round(prune_to - prune_from, 3),
        "rate_before": round(rate(prune_from - 1.0, prune_from), 0),
        "rate_during": round(rate(prune_from, prune_from + window), 0),
    }


async def w10_postgres(admin_url: str, prune_rows: int, drain: int) -> dict[str, Any]:
    url = await create_database(admin_url, "w10")
    app = skiplock.App(url)
    await app.migrate()
    conn = await asyncpg.connect(url)
    try:
        # a day partition 10 days back, made by the upkeep as of that day
        then = await conn.fetchval("SELECT now() - interval '10 days'")
        old = skiplock.App(url, clock=lambda: then)
        await (await old.backend()).storage_upkeep()
        await old.close()
        await conn.execute(
            """INSERT INTO skiplock_jobs (queue, task, state, max_attempts, attempt, finished_at)
               SELECT 'default', 'old', 'succeeded', 3, 1, $1 FROM generate_series(1, $2)""",
            then,
            prune_rows,
        )
        await conn.execute("VACUUM ANALYZE skiplock_jobs")
    finally:
        await conn.close()
    try:
        return await _drain_with_prune(app, prune_rows, drain)
    finally:
        await app.close()


async def w10_sqlite(prune_rows: int, drain: int) -> dict[str, Any]:
    import sqlite3

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "w10.db")
        app = skiplock.App(f"sqlite:///{path}")
        await app.migrate()
        conn = sqlite3.connect(path, isolation_level=None)
        then = time.time() - 10 * 86400
        conn.execute("BEGIN IMMEDIATE")
        # the day table 10 days back, as that day's completions would have filled it
        day = sqlite_history.ensure_day(conn, sqlite_history.day_of(then))
        conn.executemany(
            f"INSERT INTO {day} (queue, task, args, kwargs, state, priority, attempt,"
            " max_attempts, run_at, created_at, finished_at, errors, audit, reclaims,"
            " cancel_requested, unique_succeeded) VALUES ('default', 'old', '[]', '{}',"
            " 'succeeded', 0, 1, 3, ?, ?, ?, '[]', '[]', 0, 0, 0)",
            ((then, then, then) for _ in range(prune_rows)),
        )
        conn.execute("COMMIT")
        conn.close()
        try:
            return await _drain_with_prune(app, prune_rows, drain)
        finally:
            await app.close()


async def sqlite_upgrade(rows: int) -> dict[str, Any]:
    """SQLite's migration 11 (the history apart) on a version 10 file of ``rows`` jobs, mostly
    succeeded: a rename and a view, whatever the file holds."""
    import sqlite3

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "upgrade.db")
        app = skiplock.App(f"sqlite:///{path}")
        await app.migrate()
        await app.close()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.executescript(
            """DROP VIEW skiplock_jobs;
               ALTER TABLE skiplock_jobs_live RENAME TO skiplock_jobs;
               DELETE FROM skiplock_migrations WHERE version >= 11;"""
        )
        now = time.time()
        conn.execute(
            f"""WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
                INSERT INTO skiplock_jobs (queue, task, state, max_attempts, attempt, run_at,
                                           created_at, finished_at)
                SELECT 'default', 'old', CASE WHEN i % 100 = 0 THEN 'pending' ELSE 'succeeded'
                       END, 3, 1, :now, :now, CASE WHEN i % 100 = 0 THEN NULL
                       ELSE :now - i % 2592000 END
                FROM n""",
            {"now": now},
        )
        pages, page = (
            conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size")
        )
        size = pages * page
        conn.close()
        app = skiplock.App(f"sqlite:///{path}")
        started = time.perf_counter()
        applied = await app.migrate()
        took = time.perf_counter() - started
        counts = await app.counts()
        await app.close()
    assert applied == [11], applied
    assert counts["pending"] + counts["succeeded"] == rows, counts
    return {"rows": rows, "file_bytes": size, "migrate_s": round(took, 3)}


async def postgres_ops(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """The upgrade at ``--rows`` and W10 on a stock-settings cluster made for them."""
    with stock_cluster() as cluster:
        out["settings"] = await settings(cluster.url)
        print("server:", ", ".join(f"{k}={v}" for k, v in out["settings"].items()))
        if not args.skip_upgrade:
            out["upgrade"] = await upgrade(cluster.url, args.rows)
            print("upgrade:", json.dumps(out["upgrade"]))
        out["w10_postgres"] = await w10_postgres(cluster.url, args.prune_rows, args.drain)
        print("W10 PostgreSQL:", json.dumps(out["w10_postgres"]))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--prune-rows", type=int, default=1_000_000)
    parser.add_argument("--drain", type=int, default=200_000)
    parser.add_argument("--skip-upgrade", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--skip-postgres", action="store_true", help="SQLite's W10 alone")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    if not args.skip_postgres:
        await postgres_ops(args, out)
    if not args.skip_sqlite and not args.skip_upgrade:
        out["upgrade_sqlite"] = await sqlite_upgrade(args.rows)
        print("upgrade SQLite:", json.dumps(out["upgrade_sqlite"]))
    if not args.skip_sqlite:
        out["w10_sqlite"] = await w10_sqlite(args.prune_rows, args.drain)
        print("W10 SQLite:", json.dumps(out["w10_sqlite"]))
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"storage-ops-{stamp}.json").write_text(json.dumps(out, indent=2, default=str))
    print("targets: W10 prune < 1 s (PostgreSQL), < 2 s (SQLite); drain during >= 90 % of before")


if __name__ == "__main__":
    asyncio.run(main())
