"""How a registry row's process is told gone (``_observe/liveness.py``): on this machine by
/proc, with a reused pid told apart by its start time; never on another machine or in another
container (another boot id or pid namespace), where a pid means nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from skiplock import WorkerInfo
from skiplock._observe.liveness import dead_reason, process_gone, this_process


def test_a_process_that_exited_is_gone_and_a_reused_pid_is_told_apart() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", "from skiplock._observe.liveness import this_process as p; "
         "print(p(), flush=True); import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ) as child:  # fmt: skip
        assert child.stdout is not None and child.stdin is not None
        identity = child.stdout.readline().strip()
        if not identity or identity == "None":
            pytest.skip("no /proc here: only the silence limit applies")
        assert identity.split("/")[-2] == str(child.pid)
        assert not process_gone(identity)  # running
        space, _, start = identity.rpartition("/")
        assert process_gone(f"{space}/{int(start) + 1}")  # the pid, started at another time
        child.stdin.close()
        child.wait()
        assert process_gone(identity)  # exited


def test_a_process_in_another_pid_space_is_never_judged() -> None:
    """Another machine (boot id) or container (pid namespace): the pid means nothing here."""
    mine = this_process()
    if mine is None:
        pytest.skip("no /proc here")
    boot, namespace, _, _ = mine.split("/")
    far_pid = 2**22 + 1  # above any pid_max: no such process here
    assert process_gone(f"{boot}/{namespace}/{far_pid}/1")
    other_boot = "0" * len(boot)
    assert not process_gone(f"{other_boot}/{namespace}/{far_pid}/1")
    assert not process_gone(f"{boot}/pid:[1]/{far_pid}/1")
    assert not process_gone(None) and not process_gone("")


def test_a_silence_counts_only_if_the_reader_could_have_heard_the_beats() -> None:
    """After an outage every row is silent: the first worker back judges none dead before the
    database has answered its own beats for the silent one's whole limit."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    row = WorkerInfo(
        "w:1", "w", "elsewhere", 1, None, 1, 0, 0, now, now, None, 20.0, gone_after_s=10.0
    )
    assert dead_reason(row, answered_for_s=5.0) is None
    assert dead_reason(row, answered_for_s=10.0) == "stopped beating (silent 20s, past its 10s)"
    assert dead_reason(replace(row, silent_s=9.0), answered_for_s=60.0) is None
    assert dead_reason(replace(row, gone_after_s=None), answered_for_s=60.0) is None  # older
