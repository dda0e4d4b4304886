"""The CLI never sends a stored value's control characters to the terminal (issue 43, a low).

The attack: a task's error message holding an OSC sequence that retitles the terminal
(``\\x1b]0;pwned\\x07``) and a carriage return with an erase-line (``\\r\\x1b[2Kok``) that
rewrites the line it is on; a queue, a task, a concurrency key and a worker named with escapes,
a C1 CSI (``\\x9b``), DEL and a bidi override. Each listing is run through the real CLI in a
subprocess, its raw bytes read: no ESC, BEL, CR, C1 or DEL byte reaches stdout or stderr in text
mode, the escapes show as text instead, and ``--json`` still round-trips the exact strings.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys

import skiplock
from skiplock._cli.support import CliError
from skiplock._logging import configure_logging

from .apps import cli_app
from .helpers import ROOT, Cli, await_until, cli_fixtures, running

cli, app = cli_fixtures(cli_app)

ERROR = "boom \x1b]0;pwned\x07 then \r\x1b[2Kok"
QUEUE = "q\x1b[31mred\x9bx\x7f"
TASK = "evil\x1b]0;task\x07\u202eexe.txt"
KEY = "tenant\r\x1b[2Kkey"
WORKER = "w\x1b]0;worker\x07"
RAW = (b"\x1b", b"\x07", b"\r", "\x9b".encode(), b"\x7f", "\u202e".encode())
"""What a terminal acts on, as the bytes that would reach it (UTF-8)."""


def raw(cli: Cli, *args: str) -> tuple[bytes, bytes]:
    """A CLI run's stdout and stderr as bytes, exactly as a terminal would receive them."""
    done = subprocess.run(
        [sys.executable, "-m", "skiplock", *args],
        env=cli.env(),
        cwd=ROOT,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode in (0, 1), (args, done.stdout, done.stderr)
    return done.stdout, done.stderr


def clean(out: bytes) -> str:
    """``out`` after checking no control byte is in it; its text."""
    found = [c for c in RAW if c in out]
    assert not found, (found, out)
    return out.decode()


async def test_no_listing_prints_a_stored_values_control_characters(
    cli: Cli, app: skiplock.App
) -> None:
    doomed = await cli_app.fail.using(queue=QUEUE).aenqueue(ERROR)
    worker_run = cli.start("--queues", QUEUE, "--burst")  # the real worker, its log read
    assert await asyncio.to_thread(worker_run.wait, 60) == 0
    log = clean((cli.tmp / "worker-0.out").read_bytes())
    assert rf"job {doomed.id} dead" in log and r"queue=q\x1b[31mred\x9bx\x7f" in log
    await cli_app.record.using(queue=QUEUE).aenqueue(2)  # a queue list shows live queues
    keyed = await cli_app.record.using(concurrency_key=KEY).aenqueue(1)
    other = skiplock.App(cli.url)  # another producer's task: the CLI knows it only from its row

    @other.task(name=TASK)
    async def evil(note: str) -> None: ...

    odd = await evil.aenqueue(ERROR)
    await other.close()

    async def listed(*args: str) -> tuple[bytes, bytes]:
        return await asyncio.to_thread(raw, cli, *args, "--url", cli.url)

    async with running(app, name=WORKER, queues=("nothing-here",)) as worker:
        await await_until(worker.ready.is_set, "the worker to be ready")
        assert WORKER in {w.name for w in await app.workers()}  # its first beat came first
        outputs = {}
        for args in (
            ("job", "list"),
            ("dead", "list"),
            ("job", "show", str(doomed.id)),
            ("job", "show", str(odd.id)),
            ("job", "show", str(keyed.id)),
            ("queue", "list"),
            ("stats",),
            ("workers",),
        ):
            outputs[args] = await listed(*args)
        as_json = {}
        for name, args in (
            ("show", ("job", "show", str(doomed.id))),
            ("list", ("job", "list")),
            ("stats", ("stats",)),
            ("workers", ("workers",)),
        ):
            as_json[name] = json.loads((await listed(*args, "--json"))[0])
    text = {args: clean(out) + clean(err) for args, (out, err) in outputs.items()}
    shown = r"boom \x1b]0;pwned\x07 then \r\x1b[2Kok"
    assert shown in text[("dead", "list")] and shown in text[("job", "list")]
    assert r"evil\x1b]0;task\x07\u202eexe.txt" in text[("job", "list")]
    assert r"q\x1b[31mred\x9bx\x7f" in text[("queue", "list")]
    assert r"tenant\r\x1b[2Kkey" in text[("stats",)]
    assert r"w\x1b]0;worker\x07" in text[("workers",)]
    # --json is JSON: it escapes them itself, and a script reads the exact strings back
    assert as_json["show"]["errors"][-1]["message"] == f"ValueError: {ERROR}"
    assert as_json["show"]["args"] == [ERROR] and as_json["show"]["queue"] == QUEUE
    assert TASK in {j["task"] for j in as_json["list"]["jobs"]}
    assert KEY in {k["key"] for k in as_json["stats"]["keys"]}
    assert WORKER in {w["name"] for w in as_json["workers"]["workers"]}


def test_an_error_line_shows_the_control_characters_it_quotes() -> None:
    """``Error: ...`` may quote a stored value (a SkiplockError's message): the same rule."""
    assert CliError(f"unknown queue {QUEUE}").format_message() == (
        r"unknown queue q\x1b[31mred\x9bx\x7f"
    )


def test_plain_logs_show_skiplocks_control_characters_and_leave_the_apps_own() -> None:
    """skiplock's records name queues and tasks others chose; the application's own records
    may colour themselves on purpose."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    try:
        configure_logging(level="info", format="plain", stream=stream)
        logging.getLogger("skiplock.jobs").error("job 1 dead: queue=%s", QUEUE)
        logging.getLogger("myapp").info("\x1b[32mgreen\x1b[0m")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    ours, theirs = stream.getvalue().splitlines()
    assert ours.endswith(r"job 1 dead: queue=q\x1b[31mred\x9bx\x7f")
    assert theirs.endswith("\x1b[32mgreen\x1b[0m")
