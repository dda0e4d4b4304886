"""``skiplock workers``: the live workers, from the registry each worker beats into (see
``_observe/presence.py``): where each runs, what it claims from, how busy it is, when it last
beat, and how often its supervisor restarted it after crashes. A row silent past
``--max-silence``, or known dead (``_observe.liveness``: silent past its own limit, or its
process gone on this machine), belongs to a worker that stopped without a word; it is left
out unless ``--all``, and the other workers free its leases and forget it."""

from __future__ import annotations

import sys
from typing import Any

import click

from .._observe.liveness import dead_reason
from .._observe.stats import WorkerInfo
from .health import DEFAULT_MAX_SILENCE_S
from .output import echo, echo_json, json_option
from .support import Seconds, app_command, app_for, each_database, report_down, run_async


def worker_details(worker: WorkerInfo, max_silence_s: float) -> dict[str, Any]:
    """One registry row as ``workers --json`` prints it."""
    return {
        "id": worker.id,
        "name": worker.name,
        "host": worker.host,
        "pid": worker.pid,
        "queues": list(worker.queues) if worker.queues is not None else None,
        "concurrency": worker.concurrency,
        "running": worker.running,
        "processed": worker.processed,
        "started_at": worker.started_at,
        "heartbeat_at": worker.heartbeat_at,
        "last_claim_at": worker.last_claim_at,
        "silent_s": worker.silent_s,
        "gone_after_s": worker.gone_after_s,
        "dead": dead_reason(worker),
        "restarts": worker.restarts,
        "restarts_in_a_row": worker.restarts_in_a_row,
        "live": is_live(worker, max_silence_s),
        "database": worker.database,
        "children": [
            {"pid": c.pid, "jobs": c.jobs, "rss_bytes": c.rss_bytes} for c in worker.children
        ],
    }


def is_live(worker: WorkerInfo, max_silence_s: float) -> bool:
    return worker.silent_s <= max_silence_s and dead_reason(worker) is None


def _line(worker: WorkerInfo, several: bool = False) -> str:
    queues = ",".join(worker.queues) if worker.queues is not None else "all"
    where = f"{worker.host}:{worker.pid}"
    named = f" name={worker.name}" if worker.name and worker.name != where else ""
    restarts = ""
    if worker.restarts:
        restarts = f" restarts={worker.restarts} ({worker.restarts_in_a_row} in a row)"
    database = f" database={worker.database}" if several else ""
    children = ""
    if worker.children:  # its process tasks' children (docs/guides/processes.md)
        each = ", ".join(
            f"{c.pid} ({c.jobs} jobs, {c.rss_bytes / 2**20:.0f} MiB)" for c in worker.children
        )
        children = f" children: {each}"
    return (
        f"{where}{named}{database} queues={queues} "
        f"concurrency={worker.concurrency} running={worker.running} "
        f"processed={worker.processed}{restarts} last beat {worker.silent_s:.1f}s ago"
        f"{children}"
    )


def _mark(worker: WorkerInfo, max_silence_s: float) -> str:
    """What follows a row not live: why."""
    why = dead_reason(worker)
    if why is not None:
        return f"  (dead: {why})"
    return "" if worker.silent_s <= max_silence_s else "  (silent)"


@app_command(None, "workers")
@click.option(
    "--max-silence",
    type=Seconds(0),
    default=DEFAULT_MAX_SILENCE_S,
    show_default=True,
    help="A worker is live if it beat within this many seconds (as for health).",
)
@click.option("--all", "show_all", is_flag=True, help="Also list silent and dead workers' rows.")
@json_option
def workers_command(
    app_spec: str, url: str | None, max_silence: float, show_all: bool, as_json: bool
) -> None:
    """The live workers: host, pid, queues, load and last beat."""
    app = app_for(app_spec, url)
    parts = run_async(app, lambda: each_database(app, lambda name: app.workers(database=name)))
    rows = [w for _, part in parts if isinstance(part, list) for w in part]
    down = report_down(parts, as_json=as_json)
    live = [w for w in rows if is_live(w, max_silence)]
    shown = rows if show_all else live
    if as_json:
        echo_json(
            {
                "live": len(live),
                "silent": len(rows) - len(live),
                "workers": [worker_details(w, max_silence) for w in shown],
                **(
                    {"failed": [{"database": d.database, "error": d.error} for d in down]}
                    if down
                    else {}
                ),
            }
        )
        if down:
            sys.exit(1)
        return
    for worker in shown:
        echo(_line(worker, app.directory.several) + _mark(worker, max_silence))
    hidden = (
        ""
        if show_all or len(rows) == len(live)
        else f" ({len(rows) - len(live)} silent or dead: --all)"
    )
    echo(f"{len(live)} live worker{'' if len(live) == 1 else 's'}{hidden}")
    if down:
        sys.exit(1)
