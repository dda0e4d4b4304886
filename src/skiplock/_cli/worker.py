"""``skiplock migrate`` and ``skiplock worker``: preparing a database and working it."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Iterable
from typing import Any

import click

from .._app import App
from .._config import WorkerConfig
from .._worker.supervisor import (
    PROCESSES_PER_CPU,
    process_ports,
    report_ready,
    supervise,
    too_many_processes,
    watch_supervisor,
)
from .._worker.worker import Worker
from .options import build_config, worker_config_options
from .support import (
    CANNOT_RUN,
    LOOPS,
    CliError,
    app_command,
    app_for,
    configure_logging,
    exit_before_start,
    load_app,
    log_level_option,
    run_async,
)

log = logging.getLogger("skiplock")


@app_command(None, "migrate")
def migrate(app_spec: str, url: str | None) -> None:
    """Create or upgrade skiplock's tables in APP's database.

    Refuses (exit 2, naming both versions) a database a newer skiplock migrated."""
    app = app_for(app_spec, url)
    applied = run_async(app, app.migrate, exit_code=CANNOT_RUN)
    click.echo(f"applied migrations {applied}" if applied else "schema already up to date")


@click.command()
@click.argument("app_spec", metavar="APP")
@worker_config_options
@click.option(
    "--processes",
    "-p",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes under one supervisor (it stops if one fails at start-up); at "
    f"most {PROCESSES_PER_CPU} per CPU unless --force-processes.",
)
@click.option(
    "--force-processes",
    is_flag=True,
    help=f"Allow --processes above {PROCESSES_PER_CPU} per CPU.",
)
@click.option(
    "--loop",
    "loop_name",
    type=click.Choice(LOOPS),
    default="auto",
    show_default=True,
    help="Event loop: uvloop where installed (the skiplock[uvloop] extra), or asyncio's.",
)
@click.option("--burst", is_flag=True, help="Exit once no job is ready to run.")
@log_level_option
def worker(
    app_spec: str,
    processes: int,
    force_processes: bool,
    loop_name: str,
    burst: bool,
    log_level: str,
    log_format: str,
    **fields: Any,
) -> None:
    """Run APP's jobs (APP is MODULE:ATTRIBUTE, e.g. myapp.tasks:app).

    Every WorkerConfig field is an option; durations are in seconds."""
    # Until the event loop takes signals over, a stop request means "exit before claiming".
    signal.signal(signal.SIGTERM, exit_before_start)
    signal.signal(signal.SIGINT, exit_before_start)
    configure_logging(log_level, log_format)
    watch_supervisor()  # a supervised child stops, as on SIGTERM, once its supervisor is gone
    config = build_config(fields)  # bad values fail once, here, not in every child
    check_processes(processes, force_processes)
    if processes > 1:
        sys.exit(supervise(sys.argv[1:], processes))
    app = load_app(app_spec)
    warn_unknown_queues(app, config.queues)
    config = process_ports(config)  # a supervised child's ports: the options' + its index
    run_worker(app, config, burst=burst, loop=loop_name)


def check_processes(processes: int, force: bool) -> None:
    """Refuse more worker processes than PROCESSES_PER_CPU per usable CPU unless forced."""
    refusal = too_many_processes(processes, "Raise --concurrency instead")
    if refusal and not force:
        raise CliError(refusal, CANNOT_RUN)


def warn_unknown_queues(app: App, queues: Iterable[str] | None) -> None:
    """A queue no task or schedule of APP uses is most likely a typo: say so (jobs may still
    be sent there with ``using(queue=...)``, so it is not an error)."""
    known = {t.queue for t in app.tasks.values()} | {
        s.queue for s in app.schedules.values() if s.queue
    }
    for queue in sorted(set(queues or ()) - known):
        log.warning(
            "--queues: no task of this app uses queue %r (known: %s)",
            queue,
            ", ".join(sorted(known)) or "none",
        )


def run_worker(
    app: App, config: WorkerConfig, *, burst: bool = False, loop: str = "asyncio"
) -> None:
    """Run one worker in this process until SIGTERM/SIGINT (a second signal skips the drain).

    A SkiplockError (schema to migrate, uvloop missing, ...) ends it with one line and exit
    code 2; any other exception is a defect, logged with its traceback, exit code 1."""
    the_worker = Worker(app, config)

    async def work() -> None:
        running = asyncio.get_running_loop()
        log.info("event loop: %s.%s", type(running).__module__, type(running).__name__)
        stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            running.add_signal_handler(sig, _on_signal, the_worker, stopping, sig)
        if not await app.wait_for_database(stopping):
            return  # asked to stop before the database ever answered
        report_ready()
        await the_worker.run(burst=burst)

    try:
        run_async(app, work, loop=loop, exit_code=CANNOT_RUN)
    except click.ClickException as exc:
        exc.show()
        _exit(exc.exit_code)
    except Exception as exc:
        log.critical("worker died", exc_info=exc)
        _exit(1)
    _exit(0)


def _exit(code: int) -> None:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # job threads that overran their timeout cannot be joined; do not wait


def _on_signal(the_worker: Worker, stopping: asyncio.Event, sig: int) -> None:
    log.info("received %s", signal.Signals(sig).name)
    stopping.set()
    the_worker.request_stop()
