"""W17 workflows (issue 26): the dependency shapes pg-boss measures in its PR #777, and a
chord's callback under a SIGKILLed worker, on PostgreSQL and SQLite.

Every shape is 10,000 no-op jobs (``--quick``: 1,000), run by one ``skiplock worker`` process
at the CLI's defaults (``-c 10``, one process, uvloop where installed; started before the
enqueue and warmed by one job), a fresh schema or SQLite file per shape:

- **baseline**: 10,000 independent jobs (``enqueue_many``);
- **fan-out**: one parent, 9,999 children waiting for it
  (``chain(noop.s(), group(noop.s() x 9,999))``, one transaction);
- **fan-in**: 9,999 parents, one child waiting for all of them
  (``chord([noop.s() x 9,999], sink.s())``: the child gets the list of their results);
- **layers**: 20 layers of 500, each job of layer k waiting for 3 jobs of layer k-1
  (``noop.using(depends_on=[...])``, ``enqueue_many`` a layer, the 20 layers in one
  transaction of the bench's own connection, so no parent finishes before its children are
  written);
- **chain**: a 10,000-long chain (``chain(link.s(0), link.s(), ...)``), each link given the
  previous link's result.

Measured: the enqueue, the time from the enqueue's start to the last job's ``finished_at``,
jobs/s and its ratio to the baseline's, and how many jobs were left ``waiting`` (or in any
state but succeeded) at the end. The chain's per-link overhead is read from the rows: link
i+1's start (``JobRecord.started_at``: its claim, for a job done before its first heartbeat)
minus link i's ``finished_at`` (the commit of its outcome, which releases the next link),
p50/p95/max; the handlers' own start times (wall clock) give the same gap from the code's side.

**Chord exactly-once**: 100 runs (``--quick``: 10), each a chord of 20 members (100-860 ms,
``visibility_timeout=2``) and a callback, four runs at a time on four queues. A queue's only
worker process (the CLI's defaults) is SIGKILLed once 1-6 of the run's members have
succeeded, holding the rest (running or claimed ahead); a worker started in its place
finishes the run once the killed one's leases lapse (2 s) and a reclaim pass (any worker's,
every 5 s) makes them pending, then serves the next run and is killed in it. The members and
the callback log every start of their code to a file (``O_APPEND``): a run passes when its
callback's code ran exactly once, with all 20 results in member order.

Targets: 0 jobs left waiting in every shape; fan-out and fan-in >= 50 % of the baseline's
rate; the chain's per-link overhead p50 <= 2 ms; the callback exactly once in every run.

    .venv/bin/python -m benchmarks.workflows                # 10,000 jobs, 100 chord runs
    .venv/bin/python -m benchmarks.workflows --quick        # 1,000 jobs, 10 chord runs
    .venv/bin/python -m benchmarks.workflows --only chain,chord --databases sqlite

Results also land in ``benchmarks/results/workflows-TIMESTAMP.json``; benchmarks/HISTORY.md,
"W17 workflows".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import asyncpg

import skiplock
from skiplock import JobState, chain, chord, group
from skiplock._job import JobFilter

from .common import DEFAULT_PG_URL, percentile
from .workflows_app import LOG_ENV, register

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
APP = "benchmarks.workflows_app:app"
SHAPES = ("baseline", "fan-out", "fan-in", "layers", "chain")
LAYERS, FAN = 20, 3
STALL_S = 60.0
"""A shape whose job counts stay the same this long is given up on (the workflow sweep runs
every 5 s, so a release a completion left undone is picked up well within it)."""
CHORD_MEMBERS = 20
CHORD_SLOTS = 4
FINAL = ("succeeded", "dead", "cancelled")


# -- databases ---------------------------------------------------------------------------------


class Db:
    """A fresh PostgreSQL schema or SQLite file, and raw reads of its jobs table."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.schema = f"w17_{uuid.uuid4().hex[:8]}"
        self.folder = tempfile.mkdtemp(prefix="w17-") if kind == "sqlite" else ""
        self.path = f"{self.folder}/jobs.db"

    @property
    def url(self) -> str:
        if self.kind == "sqlite":
            return f"sqlite:///{self.path}"
        return f"{DEFAULT_PG_URL}?schema={self.schema}"

    async def job_rows(self, where: str) -> list[tuple[Any, ...]]:
        """(id, state, attempted_at, started, finished_at, result) of the jobs ``where``
        selects, times as epoch seconds; started is ``JobRecord.started_at``'s rule for a
        finished job: the heartbeat's report, else the claim."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.path)
            try:
                return conn.execute(
                    "SELECT id, state, attempted_at, coalesce(started_at, attempted_at),"
                    f" finished_at, result FROM skiplock_jobs WHERE {where}"
                ).fetchall()
            finally:
                conn.close()
        pg = await asyncpg.connect(DEFAULT_PG_URL)
        try:
            found = await pg.fetch(
                "SELECT id, state, extract(epoch FROM attempted_at)::float8,"
                " extract(epoch FROM coalesce(started_at, attempted_at))::float8,"
                " extract(epoch FROM finished_at)::float8, result::text"
                f' FROM "{self.schema}".skiplock_jobs WHERE {where}'
            )
            return [tuple(r) for r in found]
        finally:
            await pg.close()


@contextlib.asynccontextmanager
async def database(kind: str) -> AsyncIterator[Db]:
    """A fresh database of ``kind``, removed afterwards."""
    db = Db(kind)
    if kind == "sqlite":
        try:
            yield db
        finally:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(db.path + suffix)
            os.rmdir(db.folder)
        return
    admin = await asyncpg.connect(DEFAULT_PG_URL)
    try:
        await admin.execute(f'CREATE SCHEMA "{db.schema}"')
        yield db
    finally:
        await admin.execute(f'DROP SCHEMA "{db.schema}" CASCADE')
        await admin.close()


async def start_worker(url: str, *extra: str) -> asyncio.subprocess.Process:
    """``skiplock worker`` on the bench's app, at the CLI's defaults plus ``extra`` (the
    environment passed on: the chord test's log file)."""
    env = {**os.environ, "SKIPLOCK_DATABASE_URL": url, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"}
    command = [sys.executable, "-m", "skiplock", "worker", APP, "--log-level", "error", *extra]
    return await asyncio.create_subprocess_exec(
        *command, env=env, cwd=ROOT, stdout=asyncio.subprocess.DEVNULL
    )


async def stop(worker: asyncio.subprocess.Process) -> None:
    if worker.returncode is None:
        worker.send_signal(signal.SIGTERM)
    await worker.wait()


# -- the shapes ----------------------------------------------------------------------------------


async def enqueue_shape(
    shape: str, app: skiplock.App, t: dict[str, Any], n: int, db: Db
) -> tuple[list[int], int]:
    """Write the shape's ``n`` jobs; their ids (the chain's in link order), and the chain's
    expected final count (0 for other shapes)."""
    noop = t["noop"]
    if shape == "baseline":
        handles = await app.enqueue_many([noop.prepare() for _ in range(n)])
        return [h.id for h in handles], 0
    if shape == "fan-out":
        wf = await chain(noop.s(), group(noop.s() for _ in range(n - 1))).aenqueue()
        return wf.ids, 0
    if shape == "fan-in":
        wf = await chord([noop.s() for _ in range(n - 1)], t["sink"].s()).aenqueue()
        return wf.ids, 0
    if shape == "chain":
        wf = await chain(t["link"].s(0), *[t["link"].s() for _ in range(n - 1)]).aenqueue()
        return wf.ids, n
    return await enqueue_layers(app, noop, n // LAYERS, db), 0


async def enqueue_layers(app: skiplock.App, noop: Any, width: int, db: Db) -> list[int]:
    """LAYERS layers of ``width``; job j of layer k waits for jobs j, j+1, j+2 (mod width)
    of layer k-1. All in one transaction of the bench's own connection."""

    async def write(connection: object) -> list[int]:
        ids: list[int] = []
        previous: list[int] = []
        for _ in range(LAYERS):
            jobs = [
                noop.using(depends_on=[previous[(j + d) % width] for d in range(FAN)]).prepare()
                if previous
                else noop.prepare()
                for j in range(width)
            ]
            previous = [h.id for h in await app.enqueue_many(jobs, connection=connection)]
            ids += previous
        return ids

    if db.kind == "sqlite":
        conn = sqlite3.connect(db.path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            ids = await write(conn)
            conn.execute("COMMIT")
        finally:
            conn.close()
        return ids
    pg = await asyncpg.connect(DEFAULT_PG_URL)
    try:
        async with pg.transaction():
            return await write(pg)
    finally:
        await pg.close()


async def wait_finished(app: skiplock.App, expected: int) -> tuple[dict[str, int], bool]:
    """Poll the counts until ``expected`` jobs are final, or nothing moved for STALL_S."""
    last: dict[str, int] = {}
    since = time.monotonic()
    while True:
        counts = await app.counts()
        if sum(counts.get(s, 0) for s in FINAL) >= expected:
            return counts, False
        if counts != last:
            last, since = counts, time.monotonic()
        elif time.monotonic() - since > STALL_S:
            return counts, True
        await asyncio.sleep(0.05)


async def run_shape(kind: str, shape: str, n: int) -> dict[str, Any]:
    async with database(kind) as db:
        app = skiplock.App(db.url)
        t = register(app)
        await app.migrate()
        worker = await start_worker(db.url)
        try:
            warm = await t["warm"].aenqueue()
            await warm.result(timeout=60)
            began = time.time()
            ids, chain_end = await enqueue_shape(shape, app, t, n, db)
            enqueued = time.time()
            counts, stalled = await wait_finished(app, n + 1)
            waiting = await app.count_jobs(JobState.WAITING)
        finally:
            await stop(worker)
            await app.close()
        rows = await db.job_rows("task <> 'wf_warm'")
    by_id = {r[0]: r for r in rows}
    ends = [r[4] for r in rows if r[4] is not None]
    last = max(ends) if ends else float("nan")
    seconds = last - began
    states = Counter(r[1] for r in rows)
    out: dict[str, Any] = {
        "database": kind,
        "shape": shape,
        "jobs": len(ids),
        "enqueue_s": enqueued - began,
        "seconds": seconds,
        "per_s": len(ids) / seconds,
        "waiting_left": waiting,
        "states": dict(states),
        "stalled": stalled,
        "counts": counts,
    }
    if shape == "chain":
        out |= chain_gaps([by_id[i] for i in ids], chain_end)
    elif shape in ("fan-out", "fan-in"):
        out |= release_gap(shape, [by_id[i] for i in ids])
    return out


def release_gap(shape: str, rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """Fan-out: the one parent's finish to its first child's start; fan-in: the last parent's
    finish to the child's start (ms, from the rows)."""
    if shape == "fan-out":
        parent_end = rows[0][4]
        child_start = min(r[3] for r in rows[1:])
    else:
        parent_end = max(r[4] for r in rows[:-1])
        child_start = rows[-1][3]
    return {"release_to_start_ms": (child_start - parent_end) * 1000}


def chain_gaps(rows: list[tuple[Any, ...]], expected: int) -> dict[str, Any]:
    """Per link: the next link's start minus this one's finish (the rows'), and the next
    handler's own start minus this one's finish (wall clock)."""
    gaps, handler = [], []
    for before, after in itertools.pairwise(rows):
        if before[4] is None or after[3] is None:
            continue
        gaps.append((after[3] - before[4]) * 1000)
        if after[5] is not None:
            handler.append((json.loads(after[5])[1] - before[4]) * 1000)
    last = json.loads(rows[-1][5])[0] if rows[-1][5] is not None else None
    tenth = max(1, len(gaps) // 10)
    return {
        "link_p50_first_tenth_ms": percentile(gaps[:tenth], 50),
        "link_p50_last_tenth_ms": percentile(gaps[-tenth:], 50),
        "link_p50_ms": percentile(gaps, 50),
        "link_p95_ms": percentile(gaps, 95),
        "link_max_ms": max(gaps, default=float("nan")),
        "handler_p50_ms": percentile(handler, 50),
        "handler_p95_ms": percentile(handler, 95),
        "chain_result_ok": last == expected,
    }


# -- the chord under a SIGKILL ----------------------------------------------------------------


async def chord_runs(kind: str, runs: int, slots: int) -> dict[str, Any]:
    """``runs`` chords, ``slots`` at a time (a queue and a line of worker processes each)."""
    async with database(kind) as db:
        log = f"{tempfile.mkdtemp(prefix='w17-log-')}/calls.jsonl"
        os.environ[LOG_ENV] = log  # the members' and callbacks' log (the workers inherit it)
        app = skiplock.App(db.url)
        t = register(app)
        await app.migrate()
        per_run: list[dict[str, Any]] = []
        try:

            async def slot(k: int) -> None:
                """The slot's runs, one after the other: each run's worker is killed, and
                the one started in its place finishes that run and serves the next."""
                worker = await start_worker(db.url, "--queues", f"c{k}")
                try:
                    for run in range(k, runs, slots):
                        row, worker = await one_chord(app, t, db, f"c{k}", run, worker)
                        per_run.append(row)
                finally:
                    await stop(worker)

            await asyncio.gather(*(slot(k) for k in range(slots)))
        finally:
            await app.close()
        lines = read_log(log)
    return chord_report(kind, runs, per_run, lines)


def read_log(path: str) -> list[dict[str, Any]]:
    """The lines the members and callbacks logged; the file and its folder removed."""
    lines = [json.loads(x) for x in Path(path).read_text().splitlines()]
    os.unlink(path)
    os.rmdir(os.path.dirname(path))
    return lines


async def one_chord(
    app: skiplock.App,
    t: dict[str, Any],
    db: Db,
    queue: str,
    run: int,
    victim: asyncio.subprocess.Process,
) -> tuple[dict[str, Any], asyncio.subprocess.Process]:
    """One chord on ``queue``, whose only worker (``victim``) is SIGKILLed once 1-6 members
    succeeded; a worker started in its place finishes it (the victim's leases lapse after 2 s
    and the next reclaim pass, any worker's, makes them pending). Returns that worker."""
    began = time.time()
    members = [t["member"].s(run, i, 100 + 40 * i).set(queue=queue) for i in range(CHORD_MEMBERS)]
    wf = await chord(members, t["callback"].s(run).set(queue=queue)).aenqueue()
    kill_after = 1 + run % 6
    where = JobFilter(ids=tuple(wf.ids[:-1]), limit=CHORD_MEMBERS)
    while await app.count_jobs(JobState.SUCCEEDED, where) < kill_after:
        await asyncio.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    await victim.wait()
    killed_at = time.time()
    running = await app.list_jobs(JobState.RUNNING, where)
    held = [r for r in running if (r.locked_by or "").endswith(f":{victim.pid}")]
    successor = await start_worker(db.url, "--queues", queue)
    result = await wf.result(timeout=120)
    callback = await app.get_job(wf.ids[-1])
    done = time.time()
    return {
        "run": run,
        "kill_after": kill_after,
        "held_at_kill": len(held),
        "result": result,
        "callback_state": callback.state.value,
        "callback_attempt": callback.attempt,
        "seconds": done - began,
        "kill_to_done_s": done - killed_at,
    }, successor


def chord_report(
    kind: str, runs: int, per_run: list[dict[str, Any]], lines: list[dict[str, Any]]
) -> dict[str, Any]:
    calls: dict[int, list[dict[str, Any]]] = defaultdict(list)
    member_starts: Counter[tuple[int, int]] = Counter()
    for line in lines:
        if line["kind"] == "callback":
            calls[line["run"]].append(line)
        else:
            member_starts[(line["run"], line["index"])] += 1
    ran = Counter(len(calls.get(r, [])) for r in range(runs))
    complete = sum(
        1
        for r in range(runs)
        if len(calls.get(r, [])) == 1
        and calls[r][0]["n"] == CHORD_MEMBERS
        and calls[r][0]["in_order"]
    )
    return {
        "database": kind,
        "runs": runs,
        "exactly_once": ran.get(1, 0),
        "never": ran.get(0, 0),
        "more_than_once": sum(v for c, v in ran.items() if c > 1),
        "complete_in_order": complete,
        "callback_succeeded": sum(1 for p in per_run if p["callback_state"] == "succeeded"),
        "kills_holding_members": sum(1 for p in per_run if p["held_at_kill"]),
        "members_held_at_kill": sum(p["held_at_kill"] for p in per_run),
        "member_reruns": sum(c - 1 for c in member_starts.values()),
        "run_p50_s": statistics.median(p["seconds"] for p in per_run),
        "run_max_s": max(p["seconds"] for p in per_run),
        "per_run": sorted(per_run, key=lambda p: p["run"]),
    }


# -- report ------------------------------------------------------------------------------------

NAMES = {"postgres": "PostgreSQL", "sqlite": "SQLite"}


MEDIANS = (
    "enqueue_s", "seconds", "per_s", "release_to_start_ms", "link_p50_ms", "link_p95_ms",
    "link_max_ms", "handler_p50_ms", "handler_p95_ms", "link_p50_first_tenth_ms",
    "link_p50_last_tenth_ms",
)  # fmt: skip


def merged(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One shape's runs on one database as one row: medians of the measures, the worst of
    the checks, the range of the rate."""
    out = dict(rows[0])
    for field in MEDIANS:
        if field in out:
            out[field] = statistics.median(r[field] for r in rows)
    out["runs"] = len(rows)
    out["per_s_range"] = (min(r["per_s"] for r in rows), max(r["per_s"] for r in rows))
    out["waiting_left"] = max(r["waiting_left"] for r in rows)
    out["not_succeeded"] = max(r["jobs"] - r["states"].get("succeeded", 0) for r in rows)
    if "chain_result_ok" in out:
        out["chain_result_ok"] = all(r["chain_result_ok"] for r in rows)
    return out


def report(shapes: list[dict[str, Any]], chords: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    for kind in dict.fromkeys(r["database"] for r in shapes):
        mine = {
            shape: merged(rows)
            for shape in SHAPES
            if (rows := [r for r in shapes if r["database"] == kind and r["shape"] == shape])
        }
        base = mine.get("baseline")
        runs = max(r["runs"] for r in mine.values())
        lines += [
            f"W17 shapes, {NAMES[kind]} (one `skiplock worker` at its defaults: -c 10"
            + (f"; medians of {runs} runs, jobs/s min-max" if runs > 1 else "")
            + ")",
            "| shape | jobs | enqueue | enqueue start to last finished | jobs/s | vs baseline |"
            " left waiting | not succeeded |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for shape, r in mine.items():
            ratio = f"{r['per_s'] / base['per_s']:.0%}" if base else "-"
            low, high = r["per_s_range"]
            spread = f" ({low:,.0f}-{high:,.0f})" if r["runs"] > 1 else ""
            lines.append(
                f"| {shape} | {r['jobs']:,} | {r['enqueue_s']:.2f} s | {r['seconds']:.2f} s | "
                f"{r['per_s']:,.0f}{spread} | {ratio} | {r['waiting_left']} | "
                f"{r['not_succeeded']} |"
            )
        lines.append("")
        if (c := mine.get("chain")) is not None:
            lines.append(
                f"chain per-link overhead (next link's start - this link's finished_at): "
                f"p50 {c['link_p50_ms']:.2f} ms, p95 {c['link_p95_ms']:.2f} ms, max "
                f"{c['link_max_ms']:.1f} ms (p50 of the first tenth of the links "
                f"{c['link_p50_first_tenth_ms']:.2f} ms, of the last tenth "
                f"{c['link_p50_last_tenth_ms']:.2f} ms); to the next handler's own start p50 "
                f"{c['handler_p50_ms']:.2f} ms, p95 {c['handler_p95_ms']:.2f} ms; "
                f"final count right: {'yes' if c['chain_result_ok'] else 'NO'}"
            )
        for shape in ("fan-out", "fan-in"):
            if (r := mine.get(shape)) is not None:
                lines.append(
                    f"{shape}: parent(s) finished to child's first start "
                    f"{r['release_to_start_ms']:.1f} ms"
                )
        lines += ["", *targets(mine), ""]
    for c in chords:
        lines += [
            f"W17 chord exactly-once, {NAMES[c['database']]} ({c['runs']} runs of "
            f"{CHORD_MEMBERS} members + 1 callback, a worker SIGKILLed in each)",
            "| callback ran exactly once | never | more than once | with all results in order |"
            " kills holding members | members held | member re-runs |"
            " run p50 | run max |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {c['exactly_once']} / {c['runs']} | {c['never']} | {c['more_than_once']} | "
            f"{c['complete_in_order']} | {c['kills_holding_members']} | "
            f"{c['members_held_at_kill']} | {c['member_reruns']} | {c['run_p50_s']:.1f} s | "
            f"{c['run_max_s']:.1f} s |",
            f"target (exactly once in every run): "
            f"{'met' if c['complete_in_order'] == c['runs'] else 'NOT met'}",
            "",
        ]
    return "\n".join(lines)


def targets(mine: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    stuck = {s: r["waiting_left"] for s, r in mine.items()}
    out.append(
        f"target: 0 left waiting in every shape: {'met' if not any(stuck.values()) else 'NOT met'}"
    )
    base = mine.get("baseline")
    for shape in ("fan-out", "fan-in"):
        if base and (r := mine.get(shape)):
            ratio = r["per_s"] / base["per_s"]
            out.append(
                f"target: {shape} >= 50 % of the baseline's rate: {ratio:.0%}, "
                f"{'met' if ratio >= 0.5 else 'NOT met'}"
            )
    if (c := mine.get("chain")) is not None:
        out.append(
            f"target: chain per-link overhead <= 2 ms (p50): {c['link_p50_ms']:.2f} ms, "
            f"{'met' if c['link_p50_ms'] <= 2 else 'NOT met'}"
        )
    return out


# -- main ----------------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> None:
    n = 1_000 if args.quick else 10_000
    runs = args.chord_runs or (10 if args.quick else 100)
    only = set(args.only.split(","))
    shapes: list[dict[str, Any]] = []
    chords: list[dict[str, Any]] = []
    for kind in args.databases.split(","):
        for _ in range(args.runs):  # the shapes take turns, so a busy minute is shared out
            for shape in SHAPES:
                if shape in only:
                    shapes.append(await run_shape(kind, shape, n))
                    print(json.dumps(shapes[-1]), flush=True)
    for kind in args.databases.split(","):
        if "chord" in only:
            chords.append(await chord_runs(kind, runs, args.chord_slots))
            print(json.dumps({k: v for k, v in chords[-1].items() if k != "per_run"}), flush=True)
    print(report(shapes, chords))
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = {"quick": args.quick, "jobs": n, "runs": args.runs, "shapes": shapes, "chords": chords}
    (RESULTS / f"workflows-{stamp}.json").write_text(json.dumps(out, indent=1))


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 jobs a shape, 10 chords")
    parser.add_argument("--only", default=",".join((*SHAPES, "chord")))
    parser.add_argument("--databases", default="postgres,sqlite")
    parser.add_argument("--runs", type=int, default=1, help="runs of each shape (medians)")
    parser.add_argument("--chord-runs", type=int, help="chord runs (default 100, --quick 10)")
    parser.add_argument("--chord-slots", type=int, default=CHORD_SLOTS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
