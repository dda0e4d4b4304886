"""The runnable examples never rot: each guide's file in ``examples/`` runs as a user runs it
(``python examples/NAME.py``, a temporary SQLite file, or a PostgreSQL URL given), finishes by
itself and prints what its guide promises; ``make demo``'s script does too, and stops cleanly
on Ctrl-C. Every guide names its example, so a reader finds it.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import PG_URL, pg_admin

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GUIDES = ROOT / "docs" / "guides"

EXPECTED: dict[str, tuple[str, list[str]]] = {
    # guide: (its example, lines the run must print)
    "cron": (
        "cron.py",
        [
            "fires at Sat 28 Mar 02:30 CET",
            "fires at Sun 29 Mar 03:00 CEST",  # the spring-forward gap, fired once after it
            "fires at Mon 30 Mar 02:30 CEST",
            "the worker's scheduler fired 'tick' at +0 s, +1 s, +2 s",
        ],
    ),
    "deploying": (
        "deploying.py",
        [
            "$ skiplock worker deploying:app --processes 2 --concurrency 5",
            "40 jobs run by",
            "SIGTERM: the supervisor and its workers stopped, exit code 0",
        ],
    ),
    "fastapi": (
        "fastapi_requests.py",
        [
            "POST /reports -> 200, job",
            "-> 200 {'title': 'quarterly sales', 'words': 2}",
            "POST /reports?fail=1 -> 422",
            "rows saved: 1; jobs: 1",
        ],
    ),
    "job-logs": (
        "job_logs.py",
        [
            "job 1: 2 lines, all its own: account 1: rate limited, slowing down",
            "job 2: 2 lines, all its own: account 2: rate limited, slowing down",
            "flaky: a log for each of its 2 attempts",
            "chatty: kept the tail (line 49), cut",
        ],
    ),
    "keys": (
        "keys.py",
        [
            *(f"account:{a}: at most " for a in (1, 2, 3)),  # the numbers: below
            "order:1 ran charge -> pack -> ship",
            "order:2 ran charge -> pack -> ship",
        ],
    ),
    "processes": (
        "processes.py",
        [
            "render: 4 jobs ran in child processes, not the worker's",
            "4 jobs ran in 2 child processes (max_tasks_per_child=2)",
            "stuck: dead, its process killed at the timeout (SIGTERM)",
        ],
    ),
    "queues": (
        "queues.py",
        [
            "refused: queue 'email' is at its max_depth: nothing was enqueued",
            "paused: drained 0 jobs",
            "resumed: 4 jobs started over",
        ],
    ),
    "retries": (
        "retries.py",
        [
            "call_partner: done on the third attempt (attempts [1, 2] were retried)",
            "charge: dead at attempt 1: KeyError: \"no customer 'cus_404'\"",
            "import_feed: 2 dead after 2 attempts each",
            "requeued 2, then discarded 2: ['requeue', 'discard']",
        ],
    ),
    "tasks": (
        "tasks.py",
        [
            "enqueued 104 jobs; job ",
            " runs in an hour",
            "refused at enqueue: task '__main__.send_receipt'",
            "drained 103 jobs",
            "send_receipt: receipt 7, copy to books@example.com",
            "render_report: 10",
            "import_rows: 3 rows, progress row 3",
            "still pending: pending",
        ],
    ),
    "testing": ("testing.py", ["eager: passed (no database was opened)", "): passed"]),
    "transactional": (
        "transactional.py",
        [
            "orders saved: 1",
            "receipts to send: 1",
        ],
    ),
    "workflows": (
        "workflows.py",
        [
            "chain add(1, 2) | add(10) | add(100) = 113",
            "chord of add(i, i) for i in 0..3, then total = 12",
            "batch of 10 resizes, then its callback: zipped 10 images",
            "is waiting for the signal 'approved'",
            "signal sent: delivered",
            "ignored an approval from mallory",
            "refund: asked a manager about order 17; refunded by ann",
        ],
    ),
}


def env() -> dict[str, str]:
    """The caller's environment with PYTHONPATH made absolute (a worktree's ``src`` must reach
    the worker processes ``deploying.py`` starts in another directory) and no database URL."""
    paths = [
        str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    values = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONUNBUFFERED="1")
    values.pop("SKIPLOCK_DATABASE_URL", None)
    return values


@pytest.fixture
def database(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The example's arguments: none (its temporary SQLite file), or a PostgreSQL database of
    its own (dropped after), as a user points an example at a scratch database."""
    if request.param == "sqlite":
        yield []
        return
    name = f"examples_{uuid.uuid4().hex[:12]}"
    asyncio.run(pg_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield [f"{PG_URL.split('?')[0].rsplit('/', 1)[0]}/{name}"]
    finally:
        asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.mark.parametrize("database", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("guide", sorted(EXPECTED))
def test_each_guide_example_runs_and_prints_what_it_promises(
    guide: str, database: list[str], tmp_path: Path
) -> None:
    script, lines = EXPECTED[guide]
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *database],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    missing = [line for line in lines if line not in done.stdout]
    assert not missing, f"{script} did not print {missing}; it printed:\n{done.stdout}"
    caps = [int(n) for n in re.findall(r"at most (\d+) of its 6 pages at once", done.stdout)]
    assert all(n <= 2 for n in caps), f"a key ran over its key_limit=2:\n{done.stdout}"
    assert "Traceback" not in done.stderr, done.stderr
    assert not list(tmp_path.iterdir()), "the example left files in the working directory"


def test_every_guide_names_its_runnable_example() -> None:
    guides = sorted(p.stem for p in GUIDES.glob("*.md"))
    assert guides == sorted(EXPECTED), "a guide without an example here, or one that is gone"
    unnamed = [
        f"{guide}.md does not mention examples/{script}"
        for guide, (script, _lines) in EXPECTED.items()
        if f"examples/{script}" not in (GUIDES / f"{guide}.md").read_text(encoding="utf-8")
        or not (EXAMPLES / script).is_file()
    ]
    assert not unnamed, unnamed


def test_make_demo_runs_every_feature_and_ends_by_itself(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py")],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"demo exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    for line in (
        "flaky_partner: succeeded after 3 attempts",
        "poison: dead after 3 attempts; last error: ValueError",
        "sync_tenant (key_limit=2): at most {",
        "chord of 5 fetches, then total: 105",
        "batch of 40 thumbnails, then its callback: zipped 40 thumbnails",
        "refund, after waiting for a signal: order 1042 refunded, approved by ann",
    ):
        assert line in done.stdout, f"demo did not print {line!r}:\n{done.stdout}"
    caps = re.search(r"sync_tenant \(key_limit=2\): at most (\{.*?\}) at once", done.stdout)
    assert caps and max(ast.literal_eval(caps.group(1)).values()) <= 2, done.stdout


def test_ctrl_c_stops_the_demo_cleanly(tmp_path: Path) -> None:
    """Ctrl-C while the demo's worker runs: the worker stops (a job running finishes, the
    claimed ones go back), one line says so, no traceback, exit 130."""
    demo = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "demo.py")],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert demo.stdout is not None
    try:
        first = demo.stdout.readline()  # "enqueued N jobs ...": the worker is running
        assert first.startswith("enqueued "), first
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.communicate()
    assert demo.returncode == 130, f"exit {demo.returncode}\n{out}\n{err}"
    assert "interrupted: the worker stopped cleanly" in out
    assert "Traceback" not in err, err
