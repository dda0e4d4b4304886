"""Why asyncpg: the claim/complete loop through asyncpg and psycopg 3, same SQL, same table.

Run: .venv/bin/python benchmarks/driver_choice.py [POSTGRES_URL]. Prints jobs/s for each
driver draining 20,000 no-op jobs in claim batches of 100, completions in batches of 100.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

import asyncpg
import psycopg

import skiplock
from skiplock._backends.postgres.rows import completion_params
from skiplock._backends.postgres.rows import to_psycopg as _to_psycopg
from skiplock._backends.postgres.statements import Statements
from skiplock._job import Completion, Disposition

URL = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/test"
N, BATCH, SCHEMA = 20_000, 100, "skiplock_driver_bench"
SQL = Statements.for_schema(SCHEMA)


async def fill() -> None:
    admin = await asyncpg.connect(URL)
    await admin.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
    await admin.close()
    app = skiplock.App(f"{URL}?schema={SCHEMA}")
    noop = app.task(name="noop")(lambda: None)
    await app.migrate()
    await app.enqueue_many(noop.prepare() for _ in range(N))
    await app.close()


def claim_args(token: str) -> list[object]:
    return [None, BATCH, "bench", token, 300.0, 30.0, None, False, "default"]


def complete_args(ids: list[int], token: str) -> list[object]:
    outcomes = [Completion(i, token, Disposition.SUCCEED) for i in ids]
    return [*completion_params(outcomes, None, f"skiplock_{SCHEMA}"), "default"]


async def with_asyncpg() -> float:
    conn = await asyncpg.connect(URL)
    start, done, k = time.perf_counter(), 0, 0
    while True:
        k += 1
        rows = await conn.fetch(SQL.JOB_GET_AVAILABLE, *claim_args(f"a{k}"))
        if not rows:
            break
        await conn.fetch(
            SQL.JOB_SET_STATE_IF_RUNNING_MANY, *complete_args([r["id"] for r in rows], f"a{k}")
        )
        done += len(rows)
    await conn.close()
    return done / (time.perf_counter() - start)


async def with_psycopg() -> float:
    conn = await psycopg.AsyncConnection.connect(URL, autocommit=True, prepare_threshold=0)
    claim, complete = (
        _to_psycopg(SQL.JOB_GET_AVAILABLE),
        _to_psycopg(SQL.JOB_SET_STATE_IF_RUNNING_MANY),
    )
    start, done, k = time.perf_counter(), 0, 0
    while True:
        k += 1
        named = {f"p{i}": v for i, v in enumerate(claim_args(f"p{k}"), 1)}
        rows = await (await conn.execute(claim, named)).fetchall()
        if not rows:
            break
        ids = [r[0] for r in rows]
        named = {f"p{i}": v for i, v in enumerate(complete_args(ids, f"p{k}"), 1)}
        await conn.execute(complete, named)
        done += len(rows)
    await conn.close()
    return done / (time.perf_counter() - start)


async def main() -> None:
    results: dict[str, list[float]] = {"asyncpg": [], "psycopg": []}
    for _ in range(3):
        for name, run in (("asyncpg", with_asyncpg), ("psycopg", with_psycopg)):
            await fill()
            results[name].append(await run())
    print("| driver | jobs/s (median of 3) | min | max |\n| --- | --- | --- | --- |")
    for name, rates in results.items():
        print(
            f"| {name} | {statistics.median(rates):,.0f} | {min(rates):,.0f} | {max(rates):,.0f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
