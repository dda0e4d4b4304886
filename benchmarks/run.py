"""skiplock's benchmark suite, with pgqueuer, procrastinate and the seed-000 design beside it.

    .venv/bin/python -m benchmarks.run                 # everything, 3 runs each (make bench)
    .venv/bin/python -m benchmarks.run --quick         # 1 run each, small sizes: a smoke test
    .venv/bin/python -m benchmarks.run --only W2,W4    # some workloads
    .venv/bin/python -m benchmarks.run --systems skiplock,seed-000 --runs 5

Every measured step runs in a fresh interpreter (``benchmarks/child.py``) against a fresh
PostgreSQL database (created and dropped per run) or a fresh SQLite file. W2, W3 and W4 also
run through the CLI as a user starts it (``skiplock worker APP --concurrency 20``, every other
setting at its default, stopped by SIGTERM: ``cli_worker``), printed beside the same run's
in-process rows and raw ceiling. Each figure is the
median of the runs with min and max beside it. Every run's raw numbers go to
``benchmarks/results/bench-TIMESTAMP.json`` and the tables to ``bench-TIMESTAMP.md`` (also
copied to ``latest.json`` / ``latest.md``); the tables are printed at the end. Method and
reading: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import queue
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import report
from .child import SETTLE_S
from .common import (
    DEFAULT_PG_URL,
    env_for_child,
    find_postmaster,
    machine_busy_seconds,
    now,
    percentile,
    pg_cpu_seconds,
    wait_quiet,
    with_database,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6", "W7")
PEERS = ("skiplock", "pgqueuer", "procrastinate", "seed-000")
CEILING = "raw ceiling"
"""benchmarks/ceiling.py: run on every skiplock backend in W1 and W2, beside skiplock."""

FULL: dict[str, dict[str, Any]] = {
    "W1": {"n": 10_000},
    # procrastinate drains ~250 jobs/s: 10,000 would take 45-65 s a run, over the time budget.
    "W2": {"n": 10_000, "n_by_system": {"procrastinate": 2_000}},
    "W3": {"n": 200, "concurrency": 20},
    "W4": {"n": 200, "interval": 0.02},
    "W5": {"n": 100_000, "processes": (1, 2, 4), "cap_s": 20.0},
    # 50,000: a 10,000-job drain lasts ~0.3 s at this rate, too short to tell 10% from noise
    "W6": {"n": 50_000, "history": (0, 100_000, 1_000_000), "claims": 200, "claim_batch": 10},
    "W7": {"n": 1_000},
}
QUICK: dict[str, dict[str, Any]] = {
    "W1": {"n": 1_000},
    "W2": {"n": 2_000},
    "W3": {"n": 200, "concurrency": 20},
    "W4": {"n": 50, "interval": 0.02},
    "W5": {"n": 10_000, "processes": (1, 2), "cap_s": 20.0},
    "W6": {"n": 2_000, "history": (0, 20_000), "claims": 50, "claim_batch": 10},
    "W7": {"n": 200},
}

# Worker settings per system and workload. W2's are each system's best measured drain setting
# on this machine (docs/benchmarks.md, "Settings"); W3 runs everything at concurrency 20.
SETTINGS: dict[str, dict[str, dict[str, Any]]] = {
    "skiplock": {
        "W2": {"concurrency": 500, "claim_batch": 500, "poll_interval_s": 0.05},
        "W2-sqlite": {"concurrency": 500, "claim_batch": 500, "poll_interval_s": 0.05},
        "W3": {"concurrency": 20, "poll_interval_s": 0.05},
        "W4": {"concurrency": 10, "poll_interval_s": 0.05},
        "W5": {"concurrency": 500, "claim_batch": 500, "poll_interval_s": 0.05},
        "W7": {"concurrency": 50, "poll_interval_s": 0.05},
    },
    "pgqueuer": {
        "W2": {"batch_size": 1000, "pool": 10},
        "W3": {"batch_size": 10, "max_concurrent_tasks": 20, "pool": 10},
        "W4": {"batch_size": 10, "pool": 10},
    },
    "procrastinate": {
        "W2": {"concurrency": 20, "pool": 10},
        "W3": {"concurrency": 20, "pool": 10},
        "W4": {"concurrency": 1, "pool": 10},
    },
    "seed-000": {"W2": {}, "W3": {}, "W4": {}},
    CEILING: {"W2": {}},
}


DEFAULTS: dict[str, dict[str, Any]] = {
    "skiplock defaults (--concurrency 20)": {"concurrency": 20},
    "skiplock defaults (no options)": {},
}
"""The worker as a user runs it: `skiplock worker app --concurrency 20`, or with no option at
all, every other setting at its default (issue 15): the figures the swept best is compared
with."""


class StepFailed(Exception):
    """A child process failed or timed out; the message is the reason shown in the table."""


@dataclass
class Bench:
    pg_url: str
    runs: int
    sizes: dict[str, dict[str, Any]]
    systems: tuple[str, ...]
    sqlite: bool
    uvloop: bool
    stamp: str
    postmaster: int | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    sqlite_dir: Path | None = None
    """Made on first use; removed by ``cleanup``."""
    logs: Path = RESULTS / "logs"
    counter: int = 0
    src: Path | None = None
    """With --rev: the snapshot's src/ directory, first on every child's PYTHONPATH."""
    quiet_wait: float = 30.0
    quiet_budget: float = 90.0
    noisy: bool = False

    def quiet(self) -> None:
        """Before a measurement: wait for other processes' CPU use to die down (at most
        ``quiet_wait`` s each time and ``quiet_budget`` s over the whole run)."""
        wait = min(self.quiet_wait, self.quiet_budget)
        t0 = time.monotonic()
        if not wait_quiet(wait):
            self.noisy = True
        self.quiet_budget = max(0.0, self.quiet_budget - (time.monotonic() - t0))

    # -- databases ------------------------------------------------------------------------------

    def _admin(self, *statements: str, database: str | None = None) -> Any:
        import asyncpg

        url = with_database(self.pg_url, database) if database else self.pg_url

        async def go() -> Any:
            conn = await asyncpg.connect(url)
            try:
                result = None
                for statement in statements:
                    result = await conn.fetch(statement)
                return result
            finally:
                await conn.close()

        return asyncio.run(go())

    def fresh_db(self, tag: str) -> tuple[str, str]:
        """(database name, URL) of a new, empty database for one run."""
        self.counter += 1
        name = f"skiplock_bench_{self.stamp}_{self.counter}_{tag}".lower()
        name = name.replace("-", "_").replace(" ", "_")
        self._admin(f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"')
        return name, with_database(self.pg_url, name)

    def drop_leftovers(self) -> None:
        """Drop benchmark databases an interrupted earlier run left behind."""
        rows = self._admin(
            "SELECT datname FROM pg_database WHERE datname LIKE 'skiplock\\_bench\\_%'"
        )
        for row in rows or []:
            self.drop_db(row["datname"])

    def drop_db(self, name: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def analyze(self, name: str) -> None:
        self._admin("ANALYZE", database=name)
        self.checkpoint()

    def checkpoint(self) -> None:
        """Flush the setup's writes now, so the server's checkpointer does not write them out
        during the measured step (W6's million history rows left ~200 MB of dirty pages that
        were flushed during its drain: -17% in one run, with claim latency unchanged)."""
        self._admin("CHECKPOINT")

    def fresh_sqlite(self, tag: str) -> tuple[Path, str]:
        if self.sqlite_dir is None:
            self.sqlite_dir = Path(tempfile.mkdtemp(prefix="skiplock-b-"))
        self.counter += 1
        path = self.sqlite_dir / f"{self.counter}_{tag.replace(' ', '_')}.db"
        return path, f"sqlite:///{path}"

    def cleanup(self) -> None:
        """Remove this run's temporary directories (SQLite files, the --rev snapshot)."""
        if self.sqlite_dir is not None:
            shutil.rmtree(self.sqlite_dir, ignore_errors=True)
        if self.src is not None:
            shutil.rmtree(self.src.parent, ignore_errors=True)

    @staticmethod
    def drop_sqlite(path: Path) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = {**env_for_child(), **extra}
        if self.src is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(self.src), env.get("PYTHONPATH")])
            )
        return env

    def wait_for_server(self, timeout: float = 90.0) -> None:
        """Before a retry: something else on this machine may be restarting PostgreSQL."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self._admin("SELECT 1")
                return
            except Exception:
                time.sleep(1.0)

    def refresh_postmaster(self) -> int | None:
        """The server's pid now: something else on the machine may have restarted it."""
        try:
            self.postmaster = asyncio.run(find_postmaster(self.pg_url))
        except Exception:
            self.postmaster = None
        return self.postmaster

    # -- children -------------------------------------------------------------------------------

    def _spec(self, role: str, system: str, url: str, **extra: Any) -> dict[str, Any]:
        return {
            "role": role,
            "system": system,
            "url": url,
            "postmaster": self.postmaster if url.startswith("postgres") else None,
            "uvloop": self.uvloop,
            **extra,
        }

    def _log(self, label: str) -> Path:
        self.logs.mkdir(parents=True, exist_ok=True)
        return self.logs / f"{self.stamp}-{self.counter:03d}-{label}.log"

    def child(
        self, spec: dict[str, Any], label: str, timeout: float = 600, *, measured: bool = True
    ) -> tuple[dict[str, Any], float]:
        """Run one child to completion: (its RESULT, the monotonic time it was spawned)."""
        if measured:
            self.quiet()
            postmaster = self.refresh_postmaster()
            if spec.get("postmaster"):
                spec = {**spec, "postmaster": postmaster}
        log = self._log(label)
        with log.open("w") as err:
            t_spawn = now()
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "benchmarks.child", json.dumps(spec)],
                    cwd=ROOT,
                    env=self.env(),
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise StepFailed(f"timed out after {timeout:.0f} s") from exc
        return _parse_result(proc.returncode, proc.stdout, log), t_spawn

    def serve_and_feed(
        self, serve: dict[str, Any], feed: dict[str, Any], label: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """W4 across processes: start the worker child, wait for READY, run the feeder."""
        self.quiet()
        serve = {**serve, "postmaster": self.refresh_postmaster()}
        log = self._log(label)
        with log.open("w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.child", json.dumps(serve)],
                cwd=ROOT,
                env=self.env(),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
            try:
                _wait_ready(proc, 60)
                fed, _ = self.child(feed, label + "-feed", timeout=120, measured=False)
                out, _ = proc.communicate(timeout=60)
            except (StepFailed, subprocess.TimeoutExpired) as exc:
                proc.kill()
                proc.communicate()
                raise StepFailed(str(exc) or "worker did not finish") from exc
        return _parse_result(proc.returncode, out, log), fed

    # -- records --------------------------------------------------------------------------------

    def record(self, workload: str, system: str, backend: str, run: int, **data: Any) -> None:
        rec = {"workload": workload, "system": system, "backend": backend, "run": run, **data}
        self.records.append(rec)
        shown = {k: v for k, v in data.items() if not isinstance(v, list | dict)}
        print(f"  {workload} {system}/{backend} run {run + 1}: {shown}", flush=True)

    def attempt(
        self, workload: str, system: str, backend: str, run: int, step: Callable[[], dict[str, Any]]
    ) -> None:
        """Run one measurement, retried once; a failure becomes a 'failed: reason' record."""
        first_failure = None
        for _ in range(2):
            self.noisy = False
            try:
                data = step()
            except StepFailed as exc:
                data = {"error": f"failed: {exc}"}
            except Exception as exc:  # the harness must go on to the next system
                traceback.print_exc()
                data = {"error": f"failed: {type(exc).__name__}: {exc}"}
            if "error" not in data:
                break
            first_failure = first_failure or data["error"]
            self.wait_for_server()
        if first_failure and "error" not in data:
            data["retried_after"] = first_failure
        data["machine_quiet"] = not self.noisy
        self.record(workload, system, backend, run, **data)


def _parse_result(returncode: int | None, stdout: str, log: Path) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith("RESULT "):
            if returncode:
                break
            parsed: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return parsed
    tail = [ln for ln in log.read_text().splitlines() if ln.strip()][-1:] or ["no output"]
    raise StepFailed(f"exit {returncode}: {tail[0][:160]} (log: {log.name})")


def _wait_ready(proc: subprocess.Popen[str], timeout: float) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            raise StepFailed(f"worker exited with {proc.wait()} before it was ready")
        if line.strip() == "READY":
            return
    raise StepFailed("worker was not ready within 60 s")


# -- workloads ------------------------------------------------------------------------------------


SQLITE_NORMAL = "sqlite-normal"
"""skiplock on SQLite with ``?synchronous=normal``: the same file, commits not synced."""


def _backends(b: Bench, system: str) -> list[str]:
    if system == "skiplock" and b.sqlite:
        return ["postgres", "sqlite", SQLITE_NORMAL]
    return ["postgres"]


def _target(b: Bench, backend: str, tag: str) -> tuple[str, Callable[[], None]]:
    """A fresh database for one run: (URL, cleanup)."""
    if backend.startswith("sqlite"):
        path, url = b.fresh_sqlite(tag)
        url += "?synchronous=normal" if backend == SQLITE_NORMAL else ""
        return url, lambda: b.drop_sqlite(path)
    name, url = b.fresh_db(tag)
    return url, lambda: b.drop_db(name)


def _prepare(
    b: Bench, system: str, backend: str, url: str, kind: str, n: int, analyze: bool = True
) -> None:
    """Fill the queue in its own process, then ANALYZE (what autovacuum would soon do; this
    server may run without it) unless ``analyze`` is False; CHECKPOINT either way."""
    b.child(b._spec("fill", system, url, kind=kind, n=n), f"fill-{system}", measured=False)
    if backend == "postgres" and analyze:
        b.analyze(url.rsplit("/", 1)[1])
    elif backend == "postgres":
        b.checkpoint()


def _w1_step(b: Bench, system: str, backend: str, n: int) -> Callable[[], dict[str, Any]]:
    def step() -> dict[str, Any]:
        url, cleanup = _target(b, backend, f"w1_{system.replace(' ', '_')}")
        try:
            r, _ = b.child(b._spec("w1", system, url, n=n), f"w1-{system.replace(' ', '-')}")
        finally:
            cleanup()
        out: dict[str, Any] = {"n": n, "single_per_s": n / r["single_s"]}
        out["single_ms"] = 1000 * r["single_s"] / n
        if "bulk_s" in r:
            out["bulk_per_s"] = n / r["bulk_s"]
        else:
            out["bulk_error"] = "not run: no bulk enqueue API"
        return out

    return step


def w1(b: Bench) -> None:
    n = b.sizes["W1"]["n"]
    for run in range(b.runs):
        for system in b.systems:
            for backend in _backends(b, system):
                b.attempt("W1", system, backend, run, _w1_step(b, system, backend, n))
        for backend in _backends(b, "skiplock") if "skiplock" in b.systems else []:
            b.attempt("W1", CEILING, backend, run, _w1_step(b, CEILING, backend, n))


def _settings(system: str, workload: str, backend: str = "postgres") -> dict[str, Any]:
    table = SETTINGS[system]
    backend = "sqlite" if backend.startswith("sqlite") else backend
    return dict(table.get(f"{workload}-{backend}", table.get(workload, {})))


def _drain_metrics(r: dict[str, Any], t_spawn: float, n: int, backend: str) -> dict[str, Any]:
    if r["done"] != n:
        raise StepFailed(f"ran {r['done']} of {n} jobs")
    span = r["t_done"] - r["t_first_start"]
    pg = r["pg_cpu_s"] if backend == "postgres" else None
    if backend.startswith("sqlite"):
        cpu: float | None = r["worker_cpu_s"]  # the database is inside the worker process
    else:
        cpu = None if pg is None else r["worker_cpu_s"] + pg  # None: server restarted meanwhile
    return {
        "n": n,
        "settings": r["settings"],
        "jobs_per_s": n / span,
        "jobs_per_s_startup": n / (r["t_done"] - t_spawn),
        "seconds": span,
        "seconds_to_last_job_end": r["t_last_end"] - r["t_first_start"],
        "jobs_per_s_job_span": n / (r["t_last_end"] - r["t_first_start"]),
        "worker_cpu_s": r["worker_cpu_s"],
        "pg_cpu_s": pg,
        "other_cpu_s": r["other_cpu_s"],
        "jobs_per_cpu_s": n / cpu if cpu else None,
    }


def _drain_step(
    b: Bench,
    workload: str,
    system: str,
    backend: str,
    kind: str,
    n: int,
    analyze: bool = True,
    defaults: dict[str, Any] | None = None,
    **extra: Any,
) -> Any:
    """One drain; ``defaults`` runs the worker with those options only (DEFAULTS), not the
    swept best setting."""

    def step() -> dict[str, Any]:
        url, cleanup = _target(b, backend, f"{workload}_{system}")
        try:
            _prepare(b, system, backend, url, kind, n, analyze)
            base = dict(defaults) if defaults is not None else _settings(system, workload, backend)
            opts = {**base, **extra}
            spec = b._spec("drain", system, url, opts=opts)
            r, t_spawn = b.child(spec, f"{workload.lower()}-{system}")
        finally:
            cleanup()
        return {**_drain_metrics(r, t_spawn, n, backend), "analyzed": analyze}

    return step


def w2(b: Bench) -> None:
    cfg = b.sizes["W2"]
    for run in range(b.runs):
        for system in b.systems:
            n = cfg.get("n_by_system", {}).get(system, cfg["n"])
            for backend in _backends(b, system):
                step = _drain_step(b, "W2", system, backend, "noop", n)
                b.attempt("W2", system, backend, run, step)
        if "skiplock" in b.systems:
            for backend in _backends(b, "skiplock"):
                for label, options in DEFAULTS.items():
                    step = _drain_step(
                        b, "W2", "skiplock", backend, "noop", cfg["n"], defaults=options
                    )
                    b.attempt("W2", label, backend, run, step)
                step = _drain_step(b, "W2", CEILING, backend, "noop", cfg["n"])
                b.attempt("W2", CEILING, backend, run, step)
                _cli_row(b, "W2", backend, run)  # next to the rows it is compared with
            step = _drain_step(b, "W2", "skiplock", "postgres", "noop", cfg["n"], analyze=False)
            b.attempt("W2", "skiplock (table not analyzed)", "postgres", run, step)
            # A worker limited to named queues claims through another statement and index.
            for backend in ("postgres", "sqlite"):
                step = _drain_step(
                    b, "W2", "skiplock", backend, "noop", cfg["n"], False, queues=["default"]
                )
                b.attempt("W2", "skiplock --queues default (not analyzed)", backend, run, step)


def w3(b: Bench) -> None:
    n = b.sizes["W3"]["n"]
    for run in range(b.runs):
        for system in b.systems:
            for backend in _backends(b, system):
                step = _drain_step(b, "W3", system, backend, "sleep", n)
                b.attempt("W3", system, backend, run, step)
                if system == "skiplock":
                    _cli_row(b, "W3", backend, run)


def _latency(served: dict[str, Any], fed: dict[str, Any], n: int) -> dict[str, Any]:
    starts = {int(k): v for k, v in served["starts"].items()}
    missing = [seq for seq in range(n) if seq not in starts]
    if missing:
        raise StepFailed(f"{len(missing)} of {n} jobs never started")
    lat = [1000 * (starts[seq] - fed["returned"][seq]) for seq in range(n)]
    enq = [1000 * d for d in fed["enqueue_s"]]
    return {
        "n": n,
        "settings": served.get("settings"),
        "p50_ms": percentile(lat, 50),
        "p95_ms": percentile(lat, 95),
        "p99_ms": percentile(lat, 99),
        "max_ms": max(lat),
        "enqueue_p50_ms": percentile(enq, 50),
        "enqueue_p99_ms": percentile(enq, 99),
        "latencies_ms": lat,
    }


def w4(b: Bench) -> None:
    cfg = b.sizes["W4"]
    n, interval = cfg["n"], cfg["interval"]
    variants = [(s, be, False) for s in b.systems for be in _backends(b, s)]
    variants += [
        ("skiplock", be, True) for be in _backends(b, "skiplock") if "skiplock" in b.systems
    ]
    for run in range(b.runs):
        for system, backend, inproc in variants:

            def step(system: str = system, backend: str = backend, inproc: bool = inproc) -> Any:
                url, cleanup = _target(b, backend, f"w4_{system}")
                opts = _settings(system, "W4", backend)
                common = {"n": n, "interval": interval, "opts": opts}
                try:
                    install = b._spec("fill", system, url, kind="mark", n=0)
                    b.child(install, f"w4-{system}-install", measured=False)
                    if inproc:
                        r, _ = b.child(b._spec("w4_inproc", system, url, **common), "w4-inproc")
                        served, fed = r, r
                    else:
                        served, fed = b.serve_and_feed(
                            b._spec("serve", system, url, **common),
                            b._spec("feed", system, url, **common),
                            f"w4-{system}",
                        )
                finally:
                    cleanup()
                return {**_latency(served, fed, n), "same_process": inproc}

            label = "skiplock (same process)" if inproc else system
            b.attempt("W4", label, backend, run, step)
            if system == "skiplock" and not inproc:
                _cli_row(b, "W4", backend, run)


# -- the CLI worker at its defaults (issue 42) ----------------------------------------------------

CLI_CONCURRENCY = 20
CLI_APP = "benchmarks.cli_app:app"
CLI_LABEL = f"skiplock worker APP --concurrency {CLI_CONCURRENCY}"
"""The one option given; no --burst, no --poll-interval, the default log level and loop."""
CLI_KIND = {"W2": "noop", "W3": "sleep"}


def _cli_backends(b: Bench) -> list[str]:
    """The CLI rows run on PostgreSQL and on a SQLite file at its default URL."""
    if "skiplock" not in b.systems:
        return []
    return ["postgres", "sqlite"] if b.sqlite else ["postgres"]


class _Lines:
    """A process's stdout read line by line on a thread, so waiting for a line has a
    deadline (a select on a buffered text pipe can miss a line already read into its buffer)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, prefix: str, timeout: float) -> str:
        """The rest of the first line starting with ``prefix``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                what = f"the worker printed no {prefix.strip()} in {timeout:.0f} s"
                raise StepFailed(what) from None
            if line is None:
                raise StepFailed(f"the worker exited with {self.proc.wait()} before {prefix}")
            if line.startswith(prefix):
                return line[len(prefix) :]


def cli_worker(
    b: Bench,
    url: str,
    expect: int,
    label: str,
    feed: dict[str, Any] | None = None,
    options: tuple[str, ...] = (),
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Run ``skiplock worker benchmarks.cli_app:app --concurrency 20`` as a user starts it until
    ``expect`` jobs have ended, then stop it with SIGTERM; what its jobs recorded, and what the
    feeder recorded when ``feed`` (W4) is given. With ``feed``, the worker first runs one
    warm-up job (it is up and idle), then the feeder enqueues in another process. ``options``
    are added to the command line (none in ``make bench``: a probe's, to tell causes apart)."""
    exe = Path(sys.executable).parent / "skiplock"
    cmd = [str(exe), "worker", CLI_APP, "--concurrency", str(CLI_CONCURRENCY), *options]
    env = b.env(SKIPLOCK_DATABASE_URL=url, SKIPLOCK_BENCH_EXPECT=str(expect))
    b.quiet()
    b.refresh_postmaster()
    fed = None
    with b._log(label).open("w") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        lines = _Lines(proc)
        try:
            if feed is not None:
                ping = b._spec("feed", "skiplock", url, n=0, interval=0.0)
                b.child(ping, f"{label}-ping", timeout=120, measured=False)
                lines.wait_for("READY", 60)
                time.sleep(SETTLE_S)  # idle: listening, its poll timer running
                fed, _ = b.child(feed, f"{label}-feed", timeout=120, measured=False)
            done = json.loads(lines.wait_for("DONE ", 120))
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
    if code != 0:
        raise StepFailed(f"the worker exited {code} after SIGTERM (log: {label})")
    return done, fed


def _cli_step(b: Bench, workload: str) -> Callable[[str], dict[str, Any]]:
    cfg = b.sizes[workload]
    n = cfg["n"]

    def step(backend: str) -> dict[str, Any]:
        url, cleanup = _target(b, backend, f"cli_{workload}")
        label = f"cli-{workload.lower()}-{backend}"
        try:
            if workload == "W4":
                install = b._spec("fill", "skiplock", url, kind="mark", n=0)
                b.child(install, f"{label}-install", measured=False)
                feed = b._spec("feed", "skiplock", url, n=n, interval=cfg["interval"])
                done, fed = cli_worker(b, url, n + 2, label, feed)  # two warm-ups
            else:
                _prepare(b, "skiplock", backend, url, CLI_KIND[workload], n)
                done, fed = cli_worker(b, url, n, label)
        finally:
            cleanup()
        out: dict[str, Any] = {"n": n, "settings": CLI_LABEL, "loop": done["loop"]}
        if fed is not None:
            return {**out, **_latency({"starts": done["starts"]}, fed, n), "settings": CLI_LABEL}
        span = done["last_end"] - done["first_start"]
        return {**out, "seconds": span, "jobs_per_s": n / span}

    return step


def _cli_row(b: Bench, workload: str, backend: str, run: int) -> None:
    """The CLI worker at its defaults on ``backend`` (if it runs there), measured right after
    the rows it is compared with and recorded as workload "CLI W2" etc., so that its rows sit
    in a table of their own beside this run's in-process and ceiling rows."""
    if backend in _cli_backends(b):
        step = _cli_step(b, workload)
        b.attempt(f"CLI {workload}", CLI_LABEL, backend, run, lambda: step(backend))


def _cli(
    b: Bench, url: str, processes: int, concurrency: int, claim_batch: int, cap: float
) -> dict[str, Any]:
    """Run the skiplock CLI in burst mode for at most ``cap`` s (then SIGTERM, which the
    supervisor forwards): wall s spawn->exit, whether it drained, worker, PG and other CPU s."""
    exe = Path(sys.executable).parent / "skiplock"
    cmd = [str(exe), "worker", "benchmarks.skiplock_app:app", "--concurrency", str(concurrency)]
    cmd += ["--claim-batch", str(claim_batch)]
    cmd += ["--processes", str(processes), "--burst", "--log-level", "warning"]
    cmd += ["--poll-interval", "0.05"]
    env = b.env(SKIPLOCK_DATABASE_URL=url)
    b.quiet()
    b.refresh_postmaster()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    pg0, box0 = pg_cpu_seconds(b.postmaster), machine_busy_seconds()
    t0 = now()
    capped = False
    with b._log(f"w5-p{processes}").open("w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=err, start_new_session=True)
        try:
            proc.wait(timeout=cap)
        except subprocess.TimeoutExpired:
            capped = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    wall = now() - t0
    pg1, box1 = pg_cpu_seconds(b.postmaster), machine_busy_seconds()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode and not capped:
        raise StepFailed(f"skiplock worker exited {proc.returncode}")
    worker = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    pg = (pg1 - pg0) if pg0 is not None and pg1 is not None and pg1 >= pg0 else None
    other = None if pg is None else max(0.0, box1 - box0 - worker - pg)
    return {"wall": wall, "capped": capped, "worker": worker, "pg": pg, "other": other}


W5_COUNT = """
SELECT count(*) FILTER (WHERE state = 'succeeded') AS ok,
       extract(epoch FROM max(finished_at) - min(attempted_at)) AS span
FROM skiplock_jobs
"""


def w5(b: Bench) -> None:
    cfg = b.sizes["W5"]
    n, cap = cfg["n"], cfg["cap_s"]
    concurrency = SETTINGS["skiplock"]["W5"]["concurrency"]
    claim_batch = SETTINGS["skiplock"]["W5"]["claim_batch"]
    for run in range(b.runs):
        for processes in cfg["processes"]:

            def step(processes: int = processes) -> dict[str, Any]:
                name, url = b.fresh_db(f"w5_p{processes}")
                try:
                    # Not analyzed: a flood the statistics have not seen yet, the harder case
                    # (docs/design.md, "enable_sort = off").
                    _prepare(b, "skiplock", "postgres", url, "noop", n, analyze=False)
                    cli = _cli(b, url, processes, concurrency, claim_batch, cap)
                    row = b._admin(W5_COUNT, database=name)[0]
                finally:
                    b.drop_db(name)
                done = int(row["ok"])
                if not done:
                    raise StepFailed(f"no job succeeded within {cap:.0f} s")
                drained = done == n and not cli["capped"]
                cpu = cli["worker"] + cli["pg"] if cli["pg"] is not None else None
                return {
                    "n": n,
                    "done": done,
                    "drained": drained,
                    "processes": processes,
                    "settings": f"--processes {processes} --concurrency {concurrency} "
                    f"--claim-batch {claim_batch}",
                    "jobs_per_s": done / float(row["span"]),
                    "jobs_per_s_startup": n / cli["wall"] if drained else None,
                    "seconds": cli["wall"],
                    "worker_cpu_s": cli["worker"],
                    "pg_cpu_s": cli["pg"],
                    "other_cpu_s": cli["other"],
                    "jobs_per_cpu_s": done / cpu if cpu else None,
                    "stopped": None if drained else f"{done:,}",
                    "cap_s": cap,
                }

            b.attempt("W5", f"skiplock -p {processes}", "postgres", run, step)


def w6(b: Bench) -> None:
    cfg = b.sizes["W6"]
    n = cfg["n"]
    opts = _settings("skiplock", "W2")
    for run in range(b.runs):
        for history in cfg["history"]:

            def step(history: int = history) -> dict[str, Any]:
                name, url = b.fresh_db(f"w6_h{history}")
                try:
                    spec = b._spec("w6_prep", "skiplock", url, history=history, n=n)
                    spec.update(claims=cfg["claims"], claim_batch=cfg["claim_batch"])
                    prep, _ = b.child(spec, f"w6-prep-{history}", timeout=900)  # claims timed
                    b.analyze(name)
                    r, t_spawn = b.child(b._spec("drain", "skiplock", url, opts=opts), "w6-drain")
                finally:
                    b.drop_db(name)
                claim_ms = [1000 * s for s in prep["claim_s"]]
                return {
                    **_drain_metrics(r, t_spawn, n, "postgres"),
                    "history": history,
                    "claim_batch": cfg["claim_batch"],
                    "claim_p50_ms": percentile(claim_ms, 50),
                    "claim_p99_ms": percentile(claim_ms, 99),
                    "claim_ms": claim_ms,
                }

            b.attempt("W6", f"skiplock, {history:,} finished rows", "postgres", run, step)


W7_SYSTEMS = ("skiplock",)
"""Only skiplock keeps return values. pgqueuer's nearest equivalent, its CompletionWatcher
(LISTEN plus a poll, for a job's final status, no value), did not resolve the warm-up job
within 120 s in this harness when tried (1.6.0), so it is not measured yet; procrastinate keeps
no result and sends no completion notification (a caller can only poll a job's status);
seed-000 has neither."""


def _roundtrip_metrics(fed: dict[str, Any], n: int) -> dict[str, Any]:
    lat = [1000 * (a - b) for a, b in zip(fed["arrived"], fed["began"], strict=True)]
    span = max(fed["arrived"]) - min(fed["began"])
    return {
        "n": n,
        "jobs_per_s": n / span,
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
        "max_ms": max(lat),
        "latencies_ms": lat,
    }


def w7(b: Bench) -> None:
    """Round trip under load: the producer enqueues n jobs as fast as it can and awaits each
    one's outcome (skiplock: its return value) while a worker in another process drains."""
    n = b.sizes["W7"]["n"]
    for run in range(b.runs):
        for system in [s for s in b.systems if s in W7_SYSTEMS]:
            for backend in _backends(b, system):

                def step(system: str = system, backend: str = backend) -> dict[str, Any]:
                    url, cleanup = _target(b, backend, f"w7_{system}")
                    opts = _settings(system, "W7", backend)
                    try:
                        install = b._spec("fill", system, url, kind="mark", n=0)
                        b.child(install, f"w7-{system}-install", measured=False)
                        served, fed = b.serve_and_feed(
                            b._spec("serve", system, url, n=n, opts=opts),
                            b._spec("roundtrip", system, url, n=n),
                            f"w7-{system}",
                        )
                    finally:
                        cleanup()
                    return {**_roundtrip_metrics(fed, n), "settings": served.get("settings")}

                b.attempt("W7", system, backend, run, step)


RUNNERS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "W7": w7}


# -- main -----------------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("skiplock", "asyncpg", "psycopg", "pgqueuer", "procrastinate", "uvloop"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _machine(b: Bench) -> dict[str, Any]:
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    server = b._admin("SELECT version() AS v")[0]["v"]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = "unknown"
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "postgres": server.split(" on ")[0],
        "postgres_local": b.postmaster is not None,
        "commit": commit,
        "versions": _versions(),
    }


def snapshot(rev: str) -> tuple[Path, str]:
    """skiplock's src/ as committed at ``rev``, extracted to a temporary directory (git archive:
    read-only), so a run measures one consistent version whatever the working tree holds."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    tar = subprocess.run(
        ["git", "archive", commit, "src/skiplock"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    root = Path(tempfile.mkdtemp(prefix=f"skiplock-{commit}-"))
    subprocess.run(["tar", "-x", "-C", str(root)], input=tar, check=True)
    return root / "src", commit


def _skiplock_under_test(b: Bench) -> str:
    """Where the children import skiplock from (the snapshot, or the editable working tree)."""
    code = "import skiplock, os; print(os.path.dirname(skiplock.__file__))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=b.env(), capture_output=True, text=True
    )
    return out.stdout.strip() or f"import failed: {out.stderr.strip()[-200:]}"


def _tree_state(b: Bench, rev: str | None, commit: str | None) -> str:
    if rev:
        return f"skiplock as committed at {rev} ({commit}), from a git archive snapshot"
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "src"], cwd=ROOT, capture_output=True, text=True
    ).stdout.splitlines()
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    if dirty:
        return (
            f"skiplock from the working tree: HEAD {head} plus {len(dirty)} uncommitted src files"
        )
    return f"skiplock from the working tree at {head} (clean)"


def _missing_peers(systems: tuple[str, ...]) -> dict[str, str]:
    """Peers that cannot be imported here: reported as 'not run', never skipped silently."""
    missing = {}
    for system in systems:
        module = {"pgqueuer": "pgqueuer", "procrastinate": "procrastinate"}.get(system)
        if module and importlib.util.find_spec(module) is None:
            missing[system] = f"not run: {module} is not installed (pip install -e '.[bench]')"
    return missing


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="1 run each, small sizes (smoke test)")
    p.add_argument("--only", default=",".join(WORKLOADS), help="workloads, e.g. W2,W4")
    p.add_argument("--systems", default=",".join(PEERS), help="systems to run beside skiplock")
    p.add_argument("--runs", type=int, default=None, help="runs per figure (default 3; quick 1)")
    p.add_argument("--no-sqlite", action="store_true", help="skip skiplock's SQLite rows")
    p.add_argument("--uvloop", action="store_true", help="run the in-process steps on uvloop")
    p.add_argument(
        "--rev",
        default=None,
        help="benchmark skiplock as committed at this git revision (default: the working tree)",
    )
    p.add_argument(
        "--quiet-wait",
        type=float,
        default=30.0,
        help="seconds to wait, before each measurement, for other CPU load to stop",
    )
    p.add_argument(
        "--quiet-budget",
        type=float,
        default=90.0,
        help="total seconds the whole run may spend waiting for quiet (0: never wait)",
    )
    p.add_argument(
        "--url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_PG_URL),
        help="an admin URL; every run creates and drops its own database on this server",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    only = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in only if w not in RUNNERS]
    if unknown:
        raise SystemExit(f"--only: unknown workloads {unknown}; choose from {WORKLOADS}")
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    bad = [s for s in systems if s not in PEERS]
    if bad:
        raise SystemExit(f"--systems: unknown {bad}; choose from {PEERS}")
    missing = _missing_peers(systems)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    b = Bench(
        pg_url=args.url,
        runs=args.runs or (1 if args.quick else 3),
        sizes=QUICK if args.quick else FULL,
        systems=tuple(s for s in systems if s not in missing),
        sqlite=not args.no_sqlite,
        uvloop=args.uvloop,
        stamp=stamp,
        quiet_wait=args.quiet_wait,
        quiet_budget=args.quiet_budget,
    )
    commit = None
    if args.rev:
        b.src, commit = snapshot(args.rev)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: drop this run's databases
    b.drop_leftovers()
    b.postmaster = asyncio.run(find_postmaster(args.url))
    started = time.monotonic()
    meta = {"started": stamp, "runs": b.runs, "quick": args.quick, "sizes": b.sizes}
    meta.update(
        skiplock_tree=_tree_state(b, args.rev, commit), skiplock_path=_skiplock_under_test(b)
    )
    meta.update(machine=_machine(b), uvloop=args.uvloop, not_run=missing, workloads=only)
    if commit:
        meta["machine"]["commit"] = commit
    print(f"skiplock benchmarks {stamp}: {only}, {b.runs} run(s) each", flush=True)
    try:
        for workload in only:
            print(f"{workload}:", flush=True)
            RUNNERS[workload](b)
    finally:
        b.cleanup()
        meta["seconds"] = round(time.monotonic() - started, 1)
        write_results(b, meta, only, missing)
    return 0


def write_results(b: Bench, meta: dict[str, Any], only: list[str], missing: dict[str, str]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    markdown = report.markdown(b.records, meta, only, missing)
    payload = json.dumps({"meta": meta, "records": b.records}, indent=1, default=str)
    for name in (f"bench-{b.stamp}", "latest"):
        (RESULTS / f"{name}.json").write_text(payload)
        (RESULTS / f"{name}.md").write_text(markdown)
    print()
    print(markdown)
    print(f"raw runs: {RESULTS / f'bench-{b.stamp}.json'} ({meta['seconds']} s)")


if __name__ == "__main__":
    sys.exit(main())
