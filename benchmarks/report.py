"""Markdown tables from the runs' records: median (min to max) of each figure over the runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .common import summarize

DASH = "\u2013"  # between min and max in a cell

Records = list[dict[str, Any]]


def _rows(records: Records, workload: str) -> dict[tuple[str, str], Records]:
    """Records of one workload grouped by (system, backend), in first-seen order."""
    groups: dict[tuple[str, str], Records] = {}
    for rec in records:
        if rec["workload"] == workload:
            groups.setdefault((rec["system"], rec["backend"]), []).append(rec)
    return groups


def _num(value: float, kind: str) -> str:
    if kind == "rate":
        return f"{value:,.0f}"
    if kind == "ms":
        return f"{value:.2f}"
    if kind == "s":
        return f"{value:.3f}"
    if kind == "cpu":
        return f"{value:.2f}"
    if kind == "pct":
        return f"{value:+.1f}%"
    return f"{value:g}"


def cell(runs: Records, key: str, kind: str, error_key: str = "error") -> str:
    """``median (min to max)`` over the runs that produced ``key``; the reason when none did."""
    ok = [r for r in runs if r.get(key) is not None and "error" not in r]
    if not ok:
        reasons = [r.get(error_key) or r.get("error") for r in runs]
        reason = next((x for x in reasons if x), None)
        return reason or "n/a"
    s = summarize([r[key] for r in ok])
    assert s is not None
    text = _num(s["median"], kind)
    if s["n"] > 1:
        text += f" ({_num(s['min'], kind)}{DASH}{_num(s['max'], kind)})"
    failed = sum(1 for r in runs if "error" in r)
    missing = len(runs) - len(ok) - failed
    if failed and error_key == "error":
        text += f" [{failed} of {len(runs)} runs failed]"
    if missing:
        text += f" [{missing} of {len(runs)} runs without this figure]"
    return text


def median(records: Records, workload: str, system: str, backend: str, key: str) -> float | None:
    runs = _rows(records, workload).get((system, backend), [])
    s = summarize([r[key] for r in runs if r.get(key) is not None and "error" not in r])
    return s["median"] if s else None


def _table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def _settings(runs: Records) -> str:
    return next((str(r["settings"]) for r in runs if r.get("settings")), "")


CEILING = "raw ceiling"


def of_ceiling(
    records: Records, workload: str, system: str, backend: str, key: str, *, lower: bool = False
) -> str:
    """This row's median as a share of the raw ceiling's on the same backend in this run
    (benchmarks/ceiling.py); ``lower`` for figures where less is better (seconds)."""
    mine = median(records, workload, system, backend, key)
    ceiling = median(records, workload, CEILING, backend, key)
    if mine is None or not ceiling or system == CEILING:
        return ""
    return f"{(ceiling / mine if lower else mine / ceiling):.0%}"


def w1(records: Records) -> list[str]:
    rows = [
        [
            system,
            backend,
            cell(runs, "single_per_s", "rate"),
            of_ceiling(records, "W1", system, backend, "single_per_s"),
            cell(runs, "single_ms", "ms"),
            cell(runs, "bulk_per_s", "rate", error_key="bulk_error"),
            of_ceiling(records, "W1", system, backend, "bulk_per_s"),
        ]
        for (system, backend), runs in _rows(records, "W1").items()
    ]
    n = records_n(records, "W1")
    head = ["system", "backend", "one at a time, jobs/s", "of ceiling", "ms per call"]
    head += ["bulk API, jobs/s", "of ceiling"]
    return [f"### W1 enqueue: {n:,} no-op jobs", "", *_table(head, rows)]


def records_n(records: Records, workload: str | None) -> int:
    """The job count of a workload's runs (or of any run given, for workload None)."""
    return next(
        (
            int(r["n"])
            for r in records
            if (workload is None or r["workload"] == workload) and "n" in r
        ),
        0,
    )


def _drain_row(system: str, backend: str, runs: Records, records: Records) -> list[str]:
    return [
        system,
        backend,
        f"{records_n(runs, None):,}",
        _settings(runs),
        cell(runs, "jobs_per_s", "rate"),
        of_ceiling(records, runs[0]["workload"], system, backend, "jobs_per_s") if runs else "",
        cell(runs, "jobs_per_s_startup", "rate"),
        cell(runs, "worker_cpu_s", "cpu"),
        cell(runs, "pg_cpu_s", "cpu") if backend == "postgres" else "(in worker)",
        cell(runs, "jobs_per_cpu_s", "rate"),
    ]


DRAIN_HEAD = [
    "system",
    "backend",
    "jobs",
    "settings",
    "jobs/s, first start → last completion",
    "of ceiling",
    "jobs/s incl. start-up",
    "worker CPU s",
    "PostgreSQL CPU s",
    "jobs per CPU-second",
]


def w2(records: Records) -> list[str]:
    rows = [_drain_row(s, b, runs, records) for (s, b), runs in _rows(records, "W2").items()]
    title = "### W2 drain: queued no-op jobs, one worker process at its best setting"
    note = (
        "Every table is ANALYZEd after it is filled, except the row that says otherwise; "
        "procrastinate drains fewer jobs to keep the suite within its time budget."
    )
    return [title, "", note, "", *_table(DRAIN_HEAD, rows)]


def w3(records: Records) -> list[str]:
    head = ["system", "backend", "settings", "seconds, first start → last completion"]
    rows = [
        [s, b, _settings(runs), cell(runs, "seconds", "s")]
        for (s, b), runs in _rows(records, "W3").items()
    ]
    n = records_n(records, "W3")
    title = f"### W3 I/O-bound: {n} jobs of `asyncio.sleep(0.01)`, concurrency 20 (ideal 0.10 s)"
    return [title, "", *_table(head, rows)]


def w4(records: Records) -> list[str]:
    head = ["system", "backend", "p50 ms", "p95 ms", "p99 ms", "max ms"]
    head += ["enqueue call p50 ms", "enqueue call p99 ms"]
    rows = [
        [s, b]
        + [cell(runs, k, "ms") for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")]
        + [cell(runs, k, "ms") for k in ("enqueue_p50_ms", "enqueue_p99_ms")]
        for (s, b), runs in _rows(records, "W4").items()
    ]
    n = records_n(records, "W4")
    title = (
        f"### W4 latency: idle worker, {n} jobs enqueued 20 ms apart; "
        "enqueue returned (committed) → job started"
    )
    return [title, "", *_table(head, rows)]


def w7(records: Records) -> list[str]:
    head = ["system", "backend", "jobs/s", "p50 ms", "p99 ms", "max ms", "waits for"]
    waits = {"skiplock": "the return value"}
    rows = [
        [s, b]
        + [cell(runs, "jobs_per_s", "rate")]
        + [cell(runs, k, "ms") for k in ("p50_ms", "p99_ms", "max_ms")]
        + [waits.get(s, "")]
        for (s, b), runs in _rows(records, "W7").items()
    ]
    n = records_n(records, "W7")
    title = (
        f"### W7 round trip: the producer enqueues {n:,} jobs back to back and awaits each "
        "outcome while a worker in another process drains; enqueue call began → outcome "
        "arrived. Peers not run: pgqueuer keeps no result (its CompletionWatcher waits for a "
        "final status; not measured yet), procrastinate keeps none and can only poll a status"
    )
    return [title, "", *_table(head, rows)]


def w5(records: Records) -> list[str]:
    head = ["worker", "drained?", "jobs/s, first claim → last completion (DB)"]
    head += ["jobs/s, spawn → exit", "worker CPU s", "PostgreSQL CPU s", "jobs per CPU-second"]
    rows = [
        [
            s,
            _drained(runs),
            cell(runs, "jobs_per_s", "rate"),
            cell(runs, "jobs_per_s_startup", "rate"),
            cell(runs, "worker_cpu_s", "cpu"),
            cell(runs, "pg_cpu_s", "cpu"),
            cell(runs, "jobs_per_cpu_s", "rate"),
        ]
        for (s, _b), runs in _rows(records, "W5").items()
    ]
    n = records_n(records, "W5")
    title = f"### W5 scale: {n:,} queued no-op jobs, `skiplock worker --processes N --burst` (CLI)"
    note = (
        "Tables not ANALYZEd (see docs/benchmarks.md); a run still going at its time cap is "
        "stopped with SIGTERM and its rate is taken over the jobs it completed."
    )
    return [title, "", note, "", *_table(head, rows)]


def _drained(runs: Records) -> str:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return "n/a"
    stopped = [r["stopped"] for r in ok if r.get("stopped")]
    if not stopped:
        return "yes"
    if len(stopped) == len(ok):
        return f"no: stopped at {ok[0]['cap_s']:.0f} s with {' / '.join(stopped)} done"
    return f"{len(ok) - len(stopped)} of {len(ok)} runs; others stopped with {' / '.join(stopped)}"


def w6(records: Records) -> list[str]:
    groups = _rows(records, "W6")
    base = next(iter(groups.values()), [])
    base_rate = summarize([r["jobs_per_s"] for r in base if "jobs_per_s" in r])
    head = ["table", "claim p50 ms", "claim p99 ms", "W2 jobs/s", "vs empty (median)"]
    head += ["jobs/s incl. start-up"]
    rows = []
    for (s, _b), runs in groups.items():
        rate = summarize([r["jobs_per_s"] for r in runs if "jobs_per_s" in r])
        vs = (
            _num(100 * (rate["median"] / base_rate["median"] - 1), "pct")
            if rate and base_rate
            else "n/a"
        )
        rows.append(
            [
                s,
                cell(runs, "claim_p50_ms", "ms"),
                cell(runs, "claim_p99_ms", "ms"),
                cell(runs, "jobs_per_s", "rate"),
                vs,
                cell(runs, "jobs_per_s_startup", "rate"),
            ]
        )
    n = records_n(records, "W6")
    batch = next((r["claim_batch"] for r in records if "claim_batch" in r), "?")
    title = (
        f"### W6 history: finished rows kept in skiplock_jobs; claim = one claim statement "
        f"taking {batch} jobs; W2 with {n:,} jobs"
    )
    return [title, "", *_table(head, rows)]


def _check(value: float | None, ok: Callable[[float], bool], shown: str) -> list[str]:
    if value is None:
        return [shown, "not measured"]
    return [shown, "met" if ok(value) else "not met"]


def targets(records: Records) -> list[str]:
    def m(w: str, s: str, b: str, k: str) -> float | None:
        return median(records, w, s, b, k)

    def fmt(v: float | None, kind: str) -> str:
        return "n/a" if v is None else _num(v, kind)

    pg_w2 = m("W2", "skiplock", "postgres", "jobs_per_s")
    pg_bulk = m("W1", "skiplock", "postgres", "bulk_per_s")
    w3 = m("W3", "skiplock", "postgres", "seconds")
    p50 = m("W4", "skiplock", "postgres", "p50_ms")
    p99 = m("W4", "skiplock", "postgres", "p99_ms")
    sq_w2 = m("W2", "skiplock", "sqlite", "jobs_per_s")
    sq_bulk = m("W1", "skiplock", "sqlite", "bulk_per_s")
    rates = [
        summarize([r["jobs_per_s"] for r in runs if "jobs_per_s" in r])
        for runs in _rows(records, "W6").values()
    ]
    hist = None
    if len(rates) >= 2 and rates[0] and rates[-1]:
        hist = 100 * (rates[-1]["median"] / rates[0]["median"] - 1)
    rows = [
        [
            "PG W2 ≥ 15,000 jobs/s, one process",
            *_check(pg_w2, lambda v: v >= 15_000, fmt(pg_w2, "rate")),
        ],
        [
            "PG W1 bulk ≥ 100,000 jobs/s",
            *_check(pg_bulk, lambda v: v >= 100_000, fmt(pg_bulk, "rate")),
        ],
        ["PG W3 ≤ 0.12 s", *_check(w3, lambda v: v <= 0.12, fmt(w3, "s") + " s")],
        [
            "PG W4 p50 ≤ 2 ms (worker in another process)",
            *_check(p50, lambda v: v <= 2, fmt(p50, "ms") + " ms"),
        ],
        [
            "PG W4 p99 ≤ 6 ms (worker in another process)",
            *_check(p99, lambda v: v <= 6, fmt(p99, "ms") + " ms"),
        ],
        [
            "W6: W2 at the largest history within 10% of empty",
            *_check(hist, lambda v: v >= -10, fmt(hist, "pct")),
        ],
        ["SQLite W2 ≥ 10,000 jobs/s", *_check(sq_w2, lambda v: v >= 10_000, fmt(sq_w2, "rate"))],
        [
            "SQLite W1 bulk ≥ 100,000 jobs/s",
            *_check(sq_bulk, lambda v: v >= 100_000, fmt(sq_bulk, "rate")),
        ],
    ]
    return ["### Targets (medians)", "", *_table(["target", "measured", "verdict"], rows)]


SECTIONS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "W7": w7}


def markdown(
    records: Records, meta: dict[str, Any], only: list[str], missing: dict[str, str]
) -> str:
    m = meta["machine"]
    v = m["versions"]
    lines = [
        f"## skiplock benchmarks, {meta['started']}",
        "",
        f"{m['cores']} cores ({m['cpu']}), {m['postgres']}"
        f"{' on this machine' if m['postgres_local'] else ''}; Python {v['python']}; "
        f"skiplock {v['skiplock']} (commit {m['commit']}), pgqueuer {v['pgqueuer']}, "
        f"procrastinate {v['procrastinate']}, asyncpg {v['asyncpg']}, psycopg {v['psycopg']}"
        f"{', uvloop' if meta.get('uvloop') else ''}. "
        f"{meta['runs']} run(s) per figure: median (min{DASH}max).",
        "",
        f"Measured: {meta.get('skiplock_tree', 'skiplock')}.",
        "",
    ]
    for system, reason in missing.items():
        lines += [f"- {system}: {reason}", ""]
    for workload in only:
        lines += [*SECTIONS[workload](records), ""]
    lines += [*targets(records), ""]
    lines += noise(records, m["cores"] or 1)
    return "\n".join(lines)


NOISY_SHARE = 0.25
"""A run is flagged when other processes used more than this share of the machine during it."""


def noise(records: Records, cores: int) -> list[str]:
    """Runs disturbed by other load on the machine (the figures above still include them)."""
    flagged = []
    for r in records:
        other, span = r.get("other_cpu_s"), r.get("seconds")
        busy = other is not None and span and other / (span * cores) > NOISY_SHARE
        restarted = r.get("backend") == "postgres" and "pg_cpu_s" in r and r["pg_cpu_s"] is None
        if restarted:
            flagged.append(
                f"{r['workload']} {r['system']}/{r['backend']} run {r['run'] + 1} "
                "(PostgreSQL restarted during it: no server CPU figure)"
            )
        elif busy or r.get("machine_quiet") is False:
            what = f"{r['workload']} {r['system']}/{r['backend']} run {r['run'] + 1}"
            if busy:
                what += f" (other processes: {other:.2f} CPU-s in {span:.2f} s)"
            else:
                what += " (machine was busy before it started)"
            flagged.append(what)
    if not flagged:
        return ["No run was disturbed by other load on the machine.", ""]
    return [
        f"Runs during which other processes used more than {NOISY_SHARE:.0%} of the machine "
        "(included above; see the JSON): " + "; ".join(flagged) + ".",
        "",
    ]
