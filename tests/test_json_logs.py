"""``--log-format json``: a real worker's every line parses as JSON; each job event (started,
succeeded, retry, dead, reclaimed) carries its fields; a sentinel in the arguments, the
keyword arguments, the result and the error message appears nowhere. At ``info`` the routine
events (started, succeeded) are left out and the worker's summary line says what it did."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
from typing import Any

import pytest

import skiplock

from .apps import cli_app
from .helpers import Cli, cli_fixtures, wait_until

SENTINEL = "s3cr3t-6b1f0d2e"


cli, app = cli_fixtures(cli_app)


def json_lines(text: str) -> list[dict[str, Any]]:
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines
    return [json.loads(line) for line in lines]  # every line, or the test fails here


def events(records: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [r for r in records if r.get("event") == name]


@pytest.mark.slow
async def test_a_workers_json_log_has_each_event_and_no_payload(
    cli: Cli, app: skiplock.App
) -> None:
    echo = await cli_app.echo.using(correlation_id="req-42").aenqueue(SENTINEL, also=SENTINEL)
    flaky = await cli_app.flaky.aenqueue(SENTINEL)
    held = await cli_app.sleepy.aenqueue(7, 60)
    lease = ("--default-lease", "1", "--lease-margin", "0")
    json_args = ("--log-format", "json", "--log-level", "info")
    first = cli.start("--log-format", "json", "--log-level", "debug", *lease)
    cli.wait_for_line("start 7")
    assert (await echo.result(timeout=30)) == SENTINEL * 2
    with pytest.raises(skiplock.JobFailed):
        await flaky.result(timeout=30)
    # an outcome is logged once written, just after the write that woke the waiters
    wait_until(lambda: '"event": "dead"' in cli.output(0), "the dead event logged")
    wait_until(lambda: '"event": "succeeded"' in cli.output(0), "the success logged")
    os.kill(first.pid, signal.SIGKILL)  # sleepy's lease now expires unrenewed
    first.wait()
    second = cli.start(*json_args, "--maintenance-interval", "0.3", "--shutdown-timeout", "0")
    wait_until(lambda: '"event": "reclaimed"' in cli.output(1), "a reclaim event")
    second.send_signal(signal.SIGTERM)
    second.wait(timeout=30)

    at_info = json_lines(cli.output(1))
    assert not events(at_info, "started"), "a routine event logged at info"
    # the stop logs the summary of the part interval: the reclaim, the release of sleepy
    (summary,) = events(at_info, "summary")
    assert summary["level"] == "info" and summary["summary"]["reclaimed"] >= 1, summary
    assert summary["worker"].endswith(str(second.pid))
    records = json_lines(cli.output(0)) + at_info
    everything = cli.output(0) + cli.output(1)
    assert SENTINEL not in everything
    (ok,) = [r for r in events(records, "succeeded") if r["job_id"] == echo.id]
    assert ok["correlation_id"] == "req-42" and ok["task"] == "echo" and ok["queue"] == "default"
    assert ok["attempt"] == 1 and ok["duration_s"] >= 0 and ok["worker"].endswith(str(first.pid))
    assert {r["job_id"] for r in events(records, "started")} >= {echo.id, flaky.id, held.id}
    (retry,) = [r for r in events(records, "retry") if r["job_id"] == flaky.id]
    assert retry["error_type"] == "builtins.ValueError" and retry["retry_in_s"] >= 0
    (dead,) = [r for r in events(records, "dead") if r["job_id"] == flaky.id]
    assert (dead["attempt"], dead["max_attempts"], dead["level"]) == (2, 2, "error")
    lost = [r for r in events(records, "reclaimed") if r["job_id"] == held.id]
    assert lost and lost[0]["lost_by"].endswith(str(first.pid))  # the killed worker
    assert lost[0]["worker"].endswith(str(second.pid)) and lost[0]["attempt"] == 1
    for record in records:
        assert {"ts", "level", "logger", "message"} <= record.keys()


def test_configure_logging_from_python() -> None:
    out = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        skiplock.configure_logging(format="json", level="warning", stream=out)
        logging.getLogger("skiplock.jobs").warning("x %s", 1, extra={"job_id": 5, "task": "t"})
        logging.getLogger("skiplock.jobs").info("not at this level")
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
    (line,) = out.getvalue().splitlines()
    record = json.loads(line)
    assert (record["message"], record["job_id"], record["task"], record["level"]) == (
        "x 1",
        5,
        "t",
        "warning",
    )
    with pytest.raises(ValueError, match="format="):
        skiplock.configure_logging(format="xml")
