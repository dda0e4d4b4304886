"""One-by-one enqueue on SQLite beside litequeue and a raw sqlite3 insert, at the same
``synchronous`` level (issue 24: "one-by-one SQLite enqueue ≥ litequeue's at the same level").

    .venv/bin/python -m benchmarks.sqlite_enqueue            # 2,000 puts, 5 rounds
    .venv/bin/python -m benchmarks.sqlite_enqueue --jobs 500 --rounds 3

Each system writes N messages one at a time to a fresh WAL file of its own, each write its own
committed transaction, at ``synchronous=FULL`` (skiplock's default: a committed enqueue survives
a power loss) and at ``NORMAL`` (litequeue's default: it survives a crash of the process, not
of the machine):

- **raw sqlite3**: ``INSERT INTO t (payload) VALUES (?)`` in autocommit, the ceiling;
- **litequeue** (``LiteQueue.put``), its pragma set to the level after it opened;
- **skiplock, sync**: ``task.enqueue()`` from plain code (the app's sync bridge);
- **skiplock, async**: ``await task.aenqueue()`` from a coroutine, one after the other.

The systems take turns within each round (the order rotating), so a drifting machine drifts
for all alike; medians and min-max of the rounds, and each rate's ratio to litequeue's at the
same level. Results also land in ``benchmarks/results/sqlite-enqueue.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from litequeue import LiteQueue

import skiplock

RESULTS = Path(__file__).resolve().parent / "results"
LEVELS = ("full", "normal")
SYSTEMS = ("raw sqlite3", "litequeue", "skiplock, sync", "skiplock, async")
PAYLOAD = '{"n": 1}'


async def _noop(n: int) -> None:
    pass


def raw(path: Path, level: str, n: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {level.upper()}")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, payload TEXT)")
    conn.execute("INSERT INTO t (payload) VALUES (?)", (PAYLOAD,))  # warm-up
    start = time.perf_counter()
    for _ in range(n):
        conn.execute("INSERT INTO t (payload) VALUES (?)", (PAYLOAD,))
    took = time.perf_counter() - start
    conn.close()
    return n / took


def litequeue(path: Path, level: str, n: int) -> float:
    queue = LiteQueue(str(path))
    queue.conn.execute(f"PRAGMA synchronous = {level.upper()}")
    queue.put(PAYLOAD)  # warm-up
    start = time.perf_counter()
    for _ in range(n):
        queue.put(PAYLOAD)
    took = time.perf_counter() - start
    queue.close()
    return n / took


def _app(path: Path, level: str) -> tuple[skiplock.App, skiplock.Task[[int], None]]:
    app = skiplock.App(f"sqlite:///{path}?synchronous={level}")
    return app, app.task(name="noop")(_noop)


def skiplock_sync(path: Path, level: str, n: int) -> float:
    app, task = _app(path, level)
    asyncio.run(_migrate(app))
    task.enqueue(0)  # warm-up: the bridge's loop thread, its connection
    start = time.perf_counter()
    for i in range(n):
        task.enqueue(i)
    return n / (time.perf_counter() - start)  # the bridge's daemon thread ends with the process


async def _migrate(app: skiplock.App) -> None:
    await app.migrate()
    await app.close()


def skiplock_async(path: Path, level: str, n: int) -> float:
    async def run() -> float:
        app, task = _app(path, level)
        await _migrate(app)
        await task.aenqueue(0)  # warm-up
        start = time.perf_counter()
        for i in range(n):
            await task.aenqueue(i)
        took = time.perf_counter() - start
        await app.close()
        return n / took

    return asyncio.run(run())


RUNNERS: dict[str, Callable[[Path, str, int], float]] = {
    "raw sqlite3": raw,
    "litequeue": litequeue,
    "skiplock, sync": skiplock_sync,
    "skiplock, async": skiplock_async,
}


def measure(n: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    rates: dict[str, dict[str, list[float]]] = {lv: {s: [] for s in SYSTEMS} for lv in LEVELS}
    order = list(SYSTEMS)
    for r in range(rounds):
        for level in LEVELS:
            for system in order:
                with tempfile.TemporaryDirectory() as tmp:
                    rate = RUNNERS[system](Path(tmp) / "q.db", level, n)
                rates[level][system].append(rate)
                print(f"round {r + 1} {level:6} {system:16} {rate:9,.0f} /s", flush=True)
        order = order[1:] + order[:1]
    return rates


def table(rates: dict[str, dict[str, list[float]]], n: int, rounds: int) -> str:
    lines = [
        f"One-by-one enqueue on SQLite, {n:,} writes, medians (min-max) of {rounds} rounds",
        "",
        "| synchronous | system | writes/s | vs litequeue |",
        "|---|---|---|---|",
    ]
    for level in LEVELS:
        base = statistics.median(rates[level]["litequeue"])
        for system in SYSTEMS:
            got = rates[level][system]
            med = statistics.median(got)
            lines.append(
                f"| {level.upper()} | {system} | {med:,.0f} ({min(got):,.0f}-{max(got):,.0f})"
                f" | {med / base:.2f}x |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rates = measure(args.jobs, args.rounds)
    print()
    print(table(rates, args.jobs, args.rounds))
    RESULTS.mkdir(exist_ok=True)
    out = {"jobs": args.jobs, "rounds": args.rounds, "rates": rates}
    (RESULTS / "sqlite-enqueue.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
