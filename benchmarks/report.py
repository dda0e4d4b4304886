"""Markdown tables from the runs' records: median (min to max) of each figure over the runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


CLI = "skiplock worker APP --concurrency 20"
"""benchmarks/run.py's CLI_LABEL: the worker as a user starts it, every other setting default."""

W3_IDEAL_S = 0.10
"""200 jobs of 10 ms on 20 slots: W3's limit, which no queue beats (its "ceiling")."""


@dataclass(frozen=True)
class CliFigure:
    """One line of the CLI table: the CLI row's figure beside the same run's in-process row
    and the ceiling (the raw ceiling's row, W3's ideal, or none for W4's latencies), each
    taken from the jobs' own clocks: first job start → last job end, or enqueue → start."""

    workload: str
    figure: str
    key: str
    kind: str
    in_process: str
    in_process_key: str
    ceiling_key: str | None = None
    ideal: float | None = None


CLI_FIGURES = (
    CliFigure(
        "W2",
        "W2 jobs/s",
        "jobs_per_s",
        "rate",
        "skiplock defaults (--concurrency 20)",
        "jobs_per_s_job_span",
        ceiling_key="jobs_per_s_job_span",
    ),
    CliFigure(
        "W3", "W3 seconds", "seconds", "s", "skiplock", "seconds_to_last_job_end", ideal=W3_IDEAL_S
    ),
    CliFigure("W4", "W4 p50 ms", "p50_ms", "ms", "skiplock", "p50_ms"),
    CliFigure("W4", "W4 p99 ms", "p99_ms", "ms", "skiplock", "p99_ms"),
)


def _by_run(
    records: Records, workload: str, system: str, backend: str, key: str
) -> dict[int, float]:
    """One row's figure in each run that produced it, by run number."""
    runs = _rows(records, workload).get((system, backend), [])
    return {r["run"]: r[key] for r in runs if r.get(key) is not None and "error" not in r}


def run_ratio(
    records: Records, workload: str, backend: str, key: str, other: tuple[str, str]
) -> dict[str, float] | None:
    """The CLI row's figure over another row's (system, key) of the same workload, taken
    within each run and summarized over the runs: the two ran minutes apart on one machine."""
    mine = _by_run(records, f"CLI {workload}", CLI, backend, key)
    theirs = _by_run(records, workload, *other[:1], backend, other[1])
    return summarize([mine[run] / theirs[run] for run in mine if theirs.get(run)])


def _ratio_cell(ratio: dict[str, float] | None) -> str:
    if ratio is None:
        return ""
    text = f"{ratio['median']:.2f}x"
    if ratio["n"] > 1:
        text += f" ({ratio['min']:.2f}{DASH}{ratio['max']:.2f})"
    return text


def _cli_row(records: Records, f: CliFigure, backend: str, runs: Records) -> list[str]:
    rows = _rows(records, f.workload)
    inproc = rows.get((f.in_process, backend), [])
    ratio = run_ratio(records, f.workload, backend, f.key, (f.in_process, f.in_process_key))
    if f.ceiling_key:
        ceiling = cell(rows.get((CEILING, backend), []), f.ceiling_key, f.kind)
        of_it = _ratio_cell(
            run_ratio(records, f.workload, backend, f.key, (CEILING, f.ceiling_key))
        )
    elif f.ideal:
        ceiling = f"ideal {_num(f.ideal, f.kind)}"
        mine = [r[f.key] / f.ideal for r in runs if r.get(f.key) is not None and "error" not in r]
        of_it = _ratio_cell(summarize(mine))
    else:
        ceiling, of_it = "", ""
    return [
        f.figure,
        backend,
        cell(runs, f.key, f.kind),
        f.in_process,
        cell(inproc, f.in_process_key, f.kind) if inproc else "not run",
        _ratio_cell(ratio),
        ceiling,
        of_it,
    ]


def cli(records: Records) -> list[str]:
    """The CLI worker at its defaults beside the in-process row and the ceiling, per run."""
    rows = [
        _cli_row(records, f, backend, runs)
        for f in CLI_FIGURES
        for (_s, backend), runs in _rows(records, f"CLI {f.workload}").items()
    ]
    if not rows:
        return []
    head = ["figure", "backend", "CLI at defaults", "in-process row", "its figure, same run"]
    head += ["CLI ÷ in-process", "ceiling, same run", "CLI ÷ ceiling"]
    loops = sorted(
        {str(r["loop"]) for r in records if r["workload"].startswith("CLI") and r.get("loop")}
    )
    title = f"### The CLI worker at its defaults: `{CLI}`, stopped by SIGTERM"
    note = (
        "No `--burst`, no `--poll-interval`, the default log level and event loop "
        f"({', '.join(loops) or 'n/a'} here), a process that runs until SIGTERM. The jobs "
        "time themselves (first job start → last job end; W4: enqueue returned → job "
        "started), and so do the in-process and ceiling figures beside them (W2: the raw "
        "ceiling, benchmarks/ceiling.py; W3: the ideal, 200 jobs of 10 ms on 20 slots). "
        "Ratios are taken within each run, then summarized; jobs/s is better higher, seconds "
        "and ms lower."
    )
    return [title, "", note, "", *_table(head, rows)]


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
    cli_w3 = {be: m("CLI W3", CLI, be, "seconds") for be in ("postgres", "sqlite")}
    cli_w2 = run_ratio(records, "W2", "postgres", "jobs_per_s", (CEILING, "jobs_per_s_job_span"))
    cli_w2_ratio = cli_w2["median"] if cli_w2 else None
    rows = [
        [
            "CLI at defaults: PG W3 ≤ 0.12 s",
            *_check(cli_w3["postgres"], lambda v: v <= 0.12, fmt(cli_w3["postgres"], "s") + " s"),
        ],
        [
            "CLI at defaults: SQLite W3 ≤ 0.12 s",
            *_check(cli_w3["sqlite"], lambda v: v <= 0.12, fmt(cli_w3["sqlite"], "s") + " s"),
        ],
        [
            "CLI at defaults: PG W2 ≥ 0.60x the raw ceiling of the same run",
            *_check(
                cli_w2_ratio,
                lambda v: v >= 0.60,
                "n/a" if cli_w2_ratio is None else f"{cli_w2_ratio:.2f}x",
            ),
        ],
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
    if table := cli(records):
        lines += [*table, ""]
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
