"""The Django paths of ``make bench``: enqueue, drain and latency of Django tasks.

    .venv-django-bench/bin/python -m benchmarks.django_bench            # make bench-django
    .venv-django-bench/bin/python -m benchmarks.django_bench --tasks 2000 --dbs sqlite

Three systems, each a worker process (``python -m django ...``) of the project in
``benchmarks/django_project``:

- ``skiplock``: ``concurrent_worker`` on skiplock's backend (``SkiplockBackend``);
- ``tasks-db``: the same ``concurrent_worker`` on django-tasks-db's ``DatabaseBackend``;
- ``seed``: django-tasks-concurrent 0.7.3's own worker (``run_worker``) on django-tasks-db.

For each database (PostgreSQL: a schema per run; SQLite: a fresh file):

- enqueue (A/B): ``--enqueue`` tasks (3,000) enqueued with ``task.enqueue()`` inside one
  ``transaction.atomic()``, through ``SkiplockBackend`` and through django-tasks-db's
  ``DatabaseBackend`` in turn, ``--enqueue-rounds`` times (3), in the same process and database:
  the path a view takes; each round's rate and the median.
- drain: N sync no-op tasks are enqueued, then one worker is started as a user starts it, a
  long-running process stopped by SIGTERM, with each set of options in ``--workers``:
  ``defaults`` (``concurrent_worker`` with no option but ``--backend``: concurrency 3, poll
  interval 1 s, the scheduler on; the seed's ``run_worker`` with its own defaults, the same)
  and ``tuned`` (concurrency 10, poll interval 0.1 s). The rate is N / (last finish - first
  start), read from the rows' own timestamps (process start-up is not counted), as the core
  bench reads its CLI worker's. A system that has not finished after ``--timeout`` seconds is
  stopped and rated on the rows it finished.
- latency (``tuned`` only): with an idle worker running, 200 tasks are enqueued 20 ms apart
  (each its own transaction); enqueue time (the row's) → claim time (the row's), p50 and p99.

Each database runs in a process of its own (Django is set up once per process); this file is
the orchestrator, ``--one-db`` the per-database run. Results: Markdown tables on stdout and
``benchmarks/results/django-TIMESTAMP.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SYSTEMS = ("skiplock", "tasks-db", "seed")
DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
CONCURRENCY = int(os.environ.get("BENCH_DJANGO_CONCURRENCY", "10"))
INTERVAL = 0.1
LATENCY_TASKS = 200
LATENCY_GAP_S = 0.02


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# -- one database (a process of its own) -------------------------------------------------------


WORKERS = ("defaults", "tuned")
"""The worker option sets a drain runs with (see the module docstring)."""


def _options(workers: str) -> list[str]:
    if workers == "defaults":
        return []  # what `manage.py concurrent_worker` is, with no option
    return [f"--concurrency={CONCURRENCY}", f"--interval={INTERVAL}"]


def _worker(system: str, log: Path, workers: str = "tuned") -> subprocess.Popen[bytes]:
    if system == "seed":
        args = ["seed_worker", *_options(workers)]
    else:
        backend = "default" if system == "skiplock" else "tasksdb"
        args = ["concurrent_worker", f"--backend={backend}", *_options(workers)]
        if workers != "defaults":
            args += ["--no-scheduler", "--verbosity=0"]
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "django", *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _check_alive(system: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Stop the run if the worker exited on its own: its error is the result, not a rate of 0."""
    code = proc.poll()
    if code is not None:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-8:])
        raise SystemExit(f"{system}'s worker exited ({code}) before it was stopped:\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


class Rows:
    """Read a system's rows: skiplock's job table, or django-tasks-db's."""

    def __init__(self, system: str) -> None:
        self.system = system

    def clear(self) -> None:
        from django_tasks_db.models import DBTaskResult

        from skiplock.contrib.django.models import Job

        if self.system == "skiplock":
            Job.objects.all()._raw_delete(Job.objects.db)
        else:
            DBTaskResult.objects.all().delete()

    def finished(self) -> int:
        from django_tasks_db.models import DBTaskResult

        from skiplock.contrib.django.models import Job

        if self.system == "skiplock":
            return int(Job.objects.filter(state__in=["succeeded", "dead"]).count())
        return int(DBTaskResult.objects.filter(status__in=["SUCCESSFUL", "FAILED"]).count())

    def failed(self) -> int:
        from django_tasks_db.models import DBTaskResult

        from skiplock.contrib.django.models import Job

        if self.system == "skiplock":
            return int(Job.objects.filter(state="dead").count())
        return int(DBTaskResult.objects.filter(status="FAILED").count())

    def times(self) -> list[tuple[float, float | None, float | None]]:
        """(enqueued, claimed, finished) epoch seconds of every row."""
        from django_tasks_db.models import DBTaskResult

        from skiplock.contrib.django.models import Job

        def ts(value: Any) -> float | None:
            return value.timestamp() if value is not None else None

        if self.system == "skiplock":
            rows = Job.objects.values_list("created_at", "attempted_at", "finished_at")
        else:
            rows = DBTaskResult.objects.values_list("enqueued_at", "started_at", "finished_at")
        return [(ts(a) or 0.0, ts(b), ts(c)) for a, b, c in rows]


def _task(system: str) -> Any:
    from benchmarks.django_project.benchapp.tasks import noop

    return noop if system == "skiplock" else noop.using(backend="tasksdb")


def _enqueue_ab(n: int, rounds: int) -> dict[str, Any]:
    """``n`` enqueues in one ``atomic()``, skiplock's backend and django-tasks-db's in turn."""
    from django.db import transaction

    runs: dict[str, list[float]] = {"skiplock": [], "tasks-db": []}
    for _ in range(rounds):
        for system in runs:
            rows = Rows(system)
            rows.clear()
            task = _task(system)
            started = time.perf_counter()
            with transaction.atomic():
                for _ in range(n):
                    task.enqueue()
            runs[system].append(n / (time.perf_counter() - started))
            rows.clear()
    return {"n": n, "rates": runs, "median": {k: percentile(v, 50) for k, v in runs.items()}}


def _drain(system: str, n: int, timeout: float, log: Path, workers: str) -> dict[str, Any]:
    from django.db import transaction

    rows = Rows(system)
    rows.clear()
    task = _task(system)
    started = time.perf_counter()
    with transaction.atomic():
        for _ in range(n):
            task.enqueue()
    enqueue_s = time.perf_counter() - started
    proc = _worker(system, log, workers)
    deadline = time.monotonic() + timeout
    done = 0
    samples: list[tuple[int, float]] = []  # (tasks finished, the worker's CPU seconds)
    try:
        while time.monotonic() < deadline:
            done = rows.finished()
            cpu = _cpu_s(proc.pid)
            if done and cpu is not None:
                samples.append((done, cpu))
            if done >= n:
                break
            _check_alive(system, proc, log)
            time.sleep(0.2)
    finally:
        _stop(proc)
    times = [t for t in rows.times() if t[1] is not None and t[2] is not None]
    first = min(t[1] for t in times if t[1] is not None) if times else 0.0
    last = max(t[2] for t in times if t[2] is not None) if times else 0.0
    span = max(last - first, 1e-9)
    return {
        "n": n,
        "finished": len(times),
        "failed": rows.failed(),
        "complete": len(times) >= n,
        "enqueue_s": enqueue_s,
        "drain_s": span,
        "rate": len(times) / span if times else 0.0,
        "worker_cpu_us_per_task": _cpu_per_task(samples),
    }


def _cpu_s(pid: int) -> float | None:
    """The CPU seconds (user + system) process ``pid`` has used, from /proc (None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_per_task(samples: list[tuple[int, float]]) -> float | None:
    """The worker's CPU per task while it drained (from its first sample with tasks done to
    its last: start-up left out), in µs: on a machine shared with other work the drain rate
    moves with the load, this much less. One core, the worker's share of a 2-core machine,
    runs 1e6 / this tasks a second at most."""
    if len(samples) < 2 or samples[-1][0] <= samples[0][0]:
        return None
    (done0, cpu0), (done1, cpu1) = samples[0], samples[-1]
    return (cpu1 - cpu0) / (done1 - done0) * 1e6


def _latency(system: str, log: Path) -> dict[str, Any]:
    rows = Rows(system)
    rows.clear()
    task = _task(system)
    proc = _worker(system, log)
    try:
        task.enqueue()  # a probe: the worker is up once it has run
        deadline = time.monotonic() + 60
        while rows.finished() < 1 and time.monotonic() < deadline:
            _check_alive(system, proc, log)
            time.sleep(0.05)
        rows.clear()
        for _ in range(LATENCY_TASKS):
            task.enqueue()  # autocommit: each its own transaction
            time.sleep(LATENCY_GAP_S)  # the pacing of this workload, not a wait for an event
        deadline = time.monotonic() + 60
        while rows.finished() < LATENCY_TASKS and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        _stop(proc)
    waits = [(b - a) * 1000 for a, b, _ in rows.times() if b is not None]
    return {"n": len(waits), "p50_ms": percentile(waits, 50), "p99_ms": percentile(waits, 99)}


def one_db(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    from django.core.management import call_command

    import django

    django.setup()
    call_command("migrate", verbosity=0)
    log = Path(tempfile.mkstemp(prefix=f"django-bench-{kind}-", suffix=".log")[1])
    out: dict[str, Any] = {"db": kind, "log": str(log), "runs": [], "concurrency": CONCURRENCY}
    if args.enqueue:
        print(f"[{kind}] enqueue A/B of {args.enqueue}", file=sys.stderr, flush=True)
        out["enqueue"] = _enqueue_ab(args.enqueue, args.enqueue_rounds)
        print(f"[{kind}] enqueue {out['enqueue']}", file=sys.stderr, flush=True)
    for workers in args.workers:
        for system in args.systems:
            say = f"[{kind}] {system} ({workers})"
            print(f"{say}: drain of {args.tasks}", file=sys.stderr, flush=True)
            drain = _drain(system, args.tasks, args.timeout, log, workers)
            print(f"{say}: {drain}", file=sys.stderr, flush=True)
            run = {"system": system, "workers": workers, "drain": drain, "latency": None}
            if workers == "tuned":
                run["latency"] = _latency(system, log)
                print(f"{say}: latency {run['latency']}", file=sys.stderr, flush=True)
            out["runs"].append(run)
    return out


# -- the orchestrator --------------------------------------------------------------------------


def _run_db(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchmarks.django_project.settings"}
    env["BENCH_DJANGO_DB"] = kind
    schema = f"djbench_{uuid.uuid4().hex[:10]}"
    tmp = tempfile.mkdtemp(prefix="django-bench-")
    env["BENCH_DJANGO_SQLITE"] = os.path.join(tmp, "bench.sqlite3")
    if kind == "postgres":
        import psycopg

        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        env["BENCH_DJANGO_SCHEMA"] = schema
    command = [
        sys.executable,
        "-m",
        "benchmarks.django_bench",
        "--one-db",
        kind,
        "--tasks",
        str(args.tasks),
        "--timeout",
        str(args.timeout),
        "--systems",
        ",".join(args.systems),
        "--workers",
        ",".join(args.workers),
        "--enqueue",
        str(args.enqueue),
        "--enqueue-rounds",
        str(args.enqueue_rounds),
    ]
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the {kind} run failed ({done.returncode}): see its error above")
        result: dict[str, Any] = json.loads(done.stdout)
        return result
    finally:
        if kind == "postgres":
            import psycopg

            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


NAMES = {
    "skiplock": "skiplock backend, `concurrent_worker`",
    "tasks-db": "django-tasks-db, `concurrent_worker`",
    "seed": "django-tasks-db, django-tasks-concurrent 0.7.3",
}
OPTIONS = {"defaults": "defaults (concurrency 3, interval 1 s)", "tuned": "concurrency {c}, 0.1 s"}


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| Database | System | Worker options | Drained | Drain rate (tasks/s) | vs seed | "
        "Worker CPU (µs/task) | Enqueue → start p50 / p99 (ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        seeds = {r["workers"]: r["drain"]["rate"] for r in result["runs"] if r["system"] == "seed"}
        for run in result["runs"]:
            drain, latency = run["drain"], run["latency"]
            seed = seeds.get(run["workers"]) or 0.0
            ratio = f"{drain['rate'] / seed:.1f}x" if seed else "n/a"
            drained = f"{drain['finished']:,}/{drain['n']:,}"
            if drain["failed"]:
                drained += f" ({drain['failed']} failed)"
            waits = f"{latency['p50_ms']:.0f} / {latency['p99_ms']:.0f}" if latency else "-"
            options = OPTIONS[run["workers"]].format(c=result["concurrency"])
            cpu = drain.get("worker_cpu_us_per_task")
            lines.append(
                f"| {result['db']} | {NAMES[run['system']]} | {options} | {drained} | "
                f"{drain['rate']:,.0f} | {ratio} | {'-' if cpu is None else f'{cpu:.0f}'} | "
                f"{waits} |"
            )
    return "\n".join(lines)


def enqueue_table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| Database | `enqueue()` in one `atomic()` | skiplock backend (tasks/s) | "
        "django-tasks-db (tasks/s) | skiplock / django-tasks-db |",
        "|---|---|---|---|---|",
    ]
    for result in results:
        ab = result.get("enqueue")
        if not ab:
            continue
        rates, median = ab["rates"], ab["median"]

        def runs(system: str, rates: dict[str, list[float]] = rates) -> str:
            return " / ".join(f"{r:,.0f}" for r in rates[system])

        ratio = median["skiplock"] / median["tasks-db"]
        lines.append(
            f"| {result['db']} | {ab['n']:,} | {runs('skiplock')} (median "
            f"{median['skiplock']:,.0f}) | {runs('tasks-db')} (median {median['tasks-db']:,.0f}) "
            f"| {ratio:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=180.0, help="per drain, seconds")
    parser.add_argument("--dbs", default="postgres,sqlite")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY, help="tuned workers'")
    parser.add_argument("--workers", default=",".join(WORKERS), help="defaults,tuned")
    parser.add_argument("--enqueue", type=int, default=3000, help="0: no enqueue A/B")
    parser.add_argument("--enqueue-rounds", type=int, default=3)
    parser.add_argument("--one-db", choices=("postgres", "sqlite"))
    args = parser.parse_args()
    args.systems = [s for s in args.systems.split(",") if s]
    args.workers = [w for w in args.workers.split(",") if w]
    unknown = (set(args.systems) - set(SYSTEMS)) | (set(args.workers) - set(WORKERS))
    if unknown or args.tasks < 1 or args.enqueue < 0 or args.enqueue_rounds < 1:
        parser.error(
            f"--systems: of {SYSTEMS}; --workers: of {WORKERS}; --tasks >= 1; --enqueue >= 0; "
            f"--enqueue-rounds >= 1 (got {unknown or (args.tasks, args.enqueue)})"
        )
    os.environ["BENCH_DJANGO_CONCURRENCY"] = str(args.concurrency)
    if args.one_db:
        json.dump(one_db(args.one_db, args), sys.stdout)
        return
    results = [_run_db(kind, args) for kind in args.dbs.split(",") if kind]
    for result in results:
        result["concurrency"] = args.concurrency
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"django-{stamp}.json").write_text(json.dumps(results, indent=2))
    print(enqueue_table(results))
    print()
    print(table(results))


if __name__ == "__main__":
    main()
