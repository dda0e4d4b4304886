"""Which shape of the job table keeps claims fast while another session holds the MVCC horizon?

An experiment behind issue 24's storage design (docs/design.md, "Storage over time"): three
shapes of the hot path, each as the bare SQL a queue runs (enqueue, claim a batch with ``FOR
UPDATE SKIP LOCKED``, complete), driven at one fixed rate on a PostgreSQL cluster of the
bench's own with stock settings (benchmarks/cluster.py), through a clean phase, a phase with
one session holding ``BEGIN; SELECT txid_current();`` idle, and a recovery phase:

- ``inplace``: today's shape. One table; a claim updates a pending row to running, the outcome
  updates it to succeeded and it stays there as history.
- ``hot``: live rows in a small table; a finished job is moved (``DELETE ... RETURNING`` into
  an ``INSERT``) to an append-only history table, so the claim index covers live rows only and
  autovacuum has a small table to keep clean.
- ``rotate``: like ``hot``, but the live rows sit in K segment tables written in turn: every T
  seconds enqueues go to the next segment, claims drain the older segment first, and a segment
  with no live row left is ``TRUNCATE``d (under a short ``lock_timeout``, retried next beat).
  TRUNCATE drops a table's dead tuples whatever the horizon, which no VACUUM can.

A held horizon stops VACUUM and index-entry killing everywhere, so every claim has to step over
the dead index entries of the jobs claimed since the horizon was taken; what a shape can bound
is how many of them a claim meets. Per phase the table shows the completion rate against the
offered one, pickup latency (claimed minus enqueued, both by the database clock) p50/p99, the
claim statement's p50/p99, and the most dead tuples pg_stat_user_tables reported for the hot
tables. No skiplock code runs here: it measures the shapes, not the implementation.

    .venv/bin/python -m benchmarks.storage_shapes                 # 2,000 jobs/s, 30/90/30 s
    .venv/bin/python -m benchmarks.storage_shapes --rate 3000 --shapes inplace,rotate
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from .cluster import create_database, hold_horizon, settings, stock_cluster
from .common import percentile

BATCH = 200
TICK_S = 0.01

_COLUMNS = """id bigint PRIMARY KEY DEFAULT nextval('job_ids'),
    queue text NOT NULL DEFAULT 'default',
    priority integer NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(),
    state text NOT NULL DEFAULT 'pending',
    args jsonb NOT NULL DEFAULT '[]',
    lease_token text,
    attempt integer NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    claimed_at timestamptz,
    finished_at timestamptz"""

_PENDING_INDEX = "CREATE INDEX ON {t} (priority DESC, run_at, id) WHERE state = 'pending'"
_HISTORY = (
    "CREATE TABLE history (id bigint, queue text, priority integer, run_at timestamptz, "
    "state text, args jsonb, attempt integer, enqueued_at timestamptz, "
    "claimed_at timestamptz, finished_at timestamptz)"
)
_MOVE = """WITH done AS (DELETE FROM {t} WHERE id = ANY($1::bigint[]) AND lease_token = $2
    RETURNING id, queue, priority, run_at, args, attempt, enqueued_at, claimed_at)
INSERT INTO history SELECT id, queue, priority, run_at, 'succeeded', args, attempt,
    enqueued_at, claimed_at, now() FROM done"""
_CLAIM = """WITH c AS MATERIALIZED (
    SELECT id FROM {t} WHERE state = 'pending' AND run_at <= now()
    ORDER BY priority DESC, run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
UPDATE {t} j SET state = 'running', lease_token = $2, attempt = j.attempt + 1,
    claimed_at = clock_timestamp()
FROM c WHERE j.id = c.id
RETURNING j.id, extract(epoch FROM j.claimed_at - j.enqueued_at) AS pickup_s"""


@dataclass
class Shape:
    """One storage shape: its DDL, the tables that hold live rows, and how it completes."""

    name: str
    segments: int = 1

    def hot_tables(self) -> list[str]:
        if self.name == "inplace":
            return ["jobs"]
        if self.name == "hot":
            return ["hot"]
        return [f"seg_{k}" for k in range(self.segments)]

    def ddl(self) -> list[str]:
        out = ["CREATE SEQUENCE job_ids"]
        if self.name == "inplace":
            out += [f"CREATE TABLE jobs ({_COLUMNS})", _PENDING_INDEX.format(t="jobs")]
            out.append("CREATE INDEX ON jobs (finished_at) WHERE state = 'succeeded'")
            return out
        out.append(_HISTORY)
        if self.name == "hot":
            return [*out, f"CREATE TABLE hot ({_COLUMNS})", _PENDING_INDEX.format(t="hot")]
        out.append("CREATE TABLE ctl (cur integer NOT NULL)")
        out.append("INSERT INTO ctl VALUES (0)")
        for t in self.hot_tables():
            out += [f"CREATE TABLE {t} ({_COLUMNS})", _PENDING_INDEX.format(t=t)]
        return out

    def insert_sql(self) -> str:
        values = "SELECT '[1]'::jsonb FROM generate_series(1, $1)"
        if self.name == "inplace":
            return f"INSERT INTO jobs (args) {values}"
        if self.name == "hot":
            return f"INSERT INTO hot (args) {values}"
        return "SELECT route_insert($1)"  # the current segment, read in the same round trip

    def complete_sql(self, table: str) -> str:
        if self.name == "inplace":
            return (
                "UPDATE jobs SET state = 'succeeded', finished_at = now(), lease_token = NULL "
                "WHERE id = ANY($1::bigint[]) AND lease_token = $2"
            )
        return _MOVE.format(t=table)


_ROUTE_FN = """CREATE FUNCTION route_insert(n integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE k integer;
BEGIN
    SELECT cur INTO k FROM ctl;
    EXECUTE format('INSERT INTO seg_%s (args) SELECT ''[1]''::jsonb FROM generate_series(1, $1)', k)
        USING n;
END $$"""


async def produce(url: str, shape_name: str, segments: int, rate: float, seconds: float) -> None:
    """The producer process: ``rate`` jobs a second, credited on elapsed time, for ``seconds``."""
    shape = Shape(shape_name, segments)
    conn = await asyncpg.connect(url)
    sql = shape.insert_sql()
    sent = 0
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds:
        due = int(elapsed * rate) - sent
        if due > 0:
            await conn.execute(sql, due)
            sent += due
        await asyncio.sleep(TICK_S)
    await conn.close()
    print(json.dumps({"sent": sent, "seconds": time.monotonic() - start}), flush=True)


@dataclass
class Phase:
    name: str
    started: float
    ended: float = 0.0
    completed: int = 0
    pickup_s: list[float] = field(default_factory=list)
    claim_s: list[float] = field(default_factory=list)
    dead_max: int = 0
    truncates: int = 0
    truncate_misses: int = 0

    def row(self, rate: float) -> dict[str, Any]:
        span = max(self.ended - self.started, 1e-9)
        return {
            "phase": self.name,
            "offered/s": round(rate),
            "completed/s": round(self.completed / span),
            "pickup p50 ms": round(percentile(self.pickup_s, 50) * 1000, 1),
            "pickup p99 ms": round(percentile(self.pickup_s, 99) * 1000, 1),
            "claim p50 ms": round(percentile(self.claim_s, 50) * 1000, 2),
            "claim p99 ms": round(percentile(self.claim_s, 99) * 1000, 2),
            "dead max": self.dead_max,
            "truncates": f"{self.truncates}/{self.truncates + self.truncate_misses}",
        }


class Run:
    """One shape through its three phases: the worker loop, the sampler, the horizon holder."""

    def __init__(self, url: str, shape: Shape, rate: float, phases: tuple[float, float, float],
                 rotate_s: float, held: str) -> None:  # fmt: skip
        self.url, self.shape, self.rate, self.lengths = url, shape, rate, phases
        self.rotate_s, self.held = rotate_s, held
        self.phases: list[Phase] = []
        self.stop = asyncio.Event()
        self.cur = 0
        self.draining: int | None = None
        self.drained = False
        self.dirty = {0}
        self.rotated_at = 0.0

    @property
    def phase(self) -> Phase:
        return self.phases[-1]

    async def setup(self) -> None:
        conn = await asyncpg.connect(self.url)
        for stmt in self.shape.ddl():
            await conn.execute(stmt)
        if self.shape.name == "rotate":
            await conn.execute(_ROUTE_FN)
        await conn.close()

    async def work(self) -> None:
        """Claim up to BATCH, run nothing, complete them: as fast as work arrives."""
        conn = await asyncpg.connect(self.url)
        claims = {t: _CLAIM.format(t=t) for t in self.shape.hot_tables()}
        token = "w1"
        while not self.stop.is_set():
            got = 0
            for table in self._claim_order():
                t0 = time.perf_counter()
                async with conn.transaction():
                    rows = await conn.fetch(claims[table], BATCH, token)
                self.phase.claim_s.append(time.perf_counter() - t0)
                settled = time.monotonic() - self.rotated_at > 1.0  # no enqueue still routed there
                if table != self._table(self.cur) and len(rows) < BATCH and settled:
                    self.drained = True  # the older segment has no pending row left
                if not rows:
                    continue
                ids = [r["id"] for r in rows]
                await conn.execute(self.shape.complete_sql(table), ids, token)
                self.phase.completed += len(rows)
                self.phase.pickup_s.extend(float(r["pickup_s"]) for r in rows)
                got += len(rows)
            if not got:
                await asyncio.sleep(0.005)
        await conn.close()

    def _table(self, k: int) -> str:
        return (
            self.shape.hot_tables()[k]
            if self.shape.name == "rotate"
            else self.shape.hot_tables()[0]
        )

    def _claim_order(self) -> list[str]:
        if self.shape.name != "rotate":
            return self.shape.hot_tables()
        order = []
        if self.draining is not None and not self.drained:
            order.append(self._table(self.draining))
        return [*order, self._table(self.cur)]

    async def rotate(self) -> None:
        """Every rotate_s: enqueues move to the next segment; empty old segments are truncated."""
        if self.shape.name != "rotate":
            return
        conn = await asyncpg.connect(self.url)
        k = self.shape.segments
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.rotate_s)
            drained = self.draining is not None and self.drained
            if drained and await self._truncate(conn, self.draining or 0):
                self.dirty.discard(self.draining or 0)
                self.draining = None
            nxt = (self.cur + 1) % k
            if self.draining is None and nxt not in self.dirty:
                await conn.execute("UPDATE ctl SET cur = $1", nxt)
                self.draining, self.cur, self.drained = self.cur, nxt, False
                self.dirty.add(nxt)
                self.rotated_at = time.monotonic()
        await conn.close()

    async def _truncate(self, conn: asyncpg.Connection, seg: int) -> bool:
        """TRUNCATE seg if it holds no live row; never wait more than 100 ms for its lock."""
        try:
            async with conn.transaction():
                await conn.execute("SET LOCAL lock_timeout = '100ms'")
                await conn.execute(f"LOCK TABLE seg_{seg} IN ACCESS EXCLUSIVE MODE")
                if await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM seg_{seg})"):
                    return False
                await conn.execute(f"TRUNCATE seg_{seg}")
        except asyncpg.LockNotAvailableError:
            self.phase.truncate_misses += 1
            return False
        self.phase.truncates += 1
        return True

    async def sample(self) -> None:
        conn = await asyncpg.connect(self.url)
        tables = self.shape.hot_tables()
        while not self.stop.is_set():
            dead = await conn.fetchval(
                "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables "
                "WHERE relname = ANY($1::text[])",
                tables,
            )
            self.phase.dead_max = max(self.phase.dead_max, int(dead))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), 1.0)
        await conn.close()

    async def run(self) -> list[dict[str, Any]]:
        await self.setup()
        total = sum(self.lengths)
        producer = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.storage_shapes", "--produce", self.url,
            self.shape.name, str(self.shape.segments), str(self.rate), str(total),
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self.phases.append(Phase("clean", time.monotonic()))
        tasks = [asyncio.create_task(c) for c in (self.work(), self.rotate(), self.sample())]
        await asyncio.sleep(self.lengths[0])
        self._next("held" if self.held == "idle" else "readers")
        tables = self.shape.hot_tables() + ([] if self.shape.name == "inplace" else ["history"])
        await hold_horizon(self.url, self.held, self.lengths[1], tables)
        self._next("recovery")
        await asyncio.sleep(self.lengths[2])
        self.phase.ended = time.monotonic()
        await producer.communicate()
        self.stop.set()
        await asyncio.gather(*tasks)
        return [p.row(self.rate) for p in self.phases]

    def _next(self, name: str) -> None:
        now = time.monotonic()
        self.phase.ended = now
        self.phases.append(Phase(name, now))


def table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    widths = [max(len(k), *(len(str(r[k])) for r in rows)) for k in keys]
    line = lambda vals: "  ".join(str(v).rjust(w) for v, w in zip(vals, widths, strict=True))  # noqa: E731
    return "\n".join([line(keys), *(line([r[k] for k in keys]) for r in rows)])


async def main(args: argparse.Namespace) -> None:
    with stock_cluster() as cluster:
        print("server:", json.dumps(await settings(cluster.url)))
        for name in args.shapes.split(","):
            shape = Shape(name, args.segments)
            url = await create_database(cluster.url, f"shape_{name}")
            lengths = (args.clean, args.held, args.recovery)
            rows = await Run(url, shape, args.rate, lengths, args.rotate_s, args.holder).run()
            extra = f", {args.segments} segments, rotate every {args.rotate_s} s" * (
                name == "rotate"
            )
            print(f"\n{name} ({args.rate:.0f} jobs/s offered, batch {BATCH}{extra}):")
            print(table(rows), flush=True)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.storage_shapes")
    p.add_argument("--shapes", default="inplace,hot,rotate")
    p.add_argument("--rate", type=float, default=2000.0, help="jobs a second offered")
    p.add_argument("--clean", type=float, default=30.0, help="seconds")
    p.add_argument("--held", type=float, default=90.0, help="seconds")
    p.add_argument("--recovery", type=float, default=30.0, help="seconds")
    p.add_argument("--holder", choices=("idle", "readers"), default="idle")
    p.add_argument("--segments", type=int, default=4)
    p.add_argument("--rotate-s", type=float, default=5.0)
    return p.parse_args(argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--produce"]:
        url, shape_name, segments, rate, seconds = sys.argv[2:7]
        asyncio.run(produce(url, shape_name, int(segments), float(rate), float(seconds)))
    else:
        asyncio.run(main(parse(sys.argv[1:])))
