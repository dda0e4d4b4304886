"""The supervisor's exit code with real child processes and no database: a stop that arrives
while a crash is being handled (the SIGTERM that lands during the lease release) must not turn
that crash into a failed shutdown, and a child that dies another way after the stop still does.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from skiplock._worker.supervisor import Backoff, Child, Supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def run_in_thread(supervisor: Supervisor, processes: int) -> tuple[threading.Thread, list[int]]:
    code: list[int] = []
    thread = threading.Thread(target=lambda: code.append(supervisor.run(processes)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while len(supervisor.children) < processes:
        assert time.monotonic() < deadline, "children never started"
        time.sleep(0.01)
    return thread, code


def test_a_stop_during_a_crashs_release_exits_zero() -> None:
    """The crash was seen before the stop: it would have been restarted, so it is not counted;
    the stop then ends the rest cleanly (the forwarded SIGTERM)."""
    released: list[list[tuple[str, str]]] = []

    def release(workers: list[tuple[str, str]]) -> list[int]:
        released.append(workers)
        supervisor.forward(signal.SIGTERM, None)  # the stop lands mid-release
        return [1]

    supervisor = Supervisor(SLEEPER, release=release)
    thread, code = run_in_thread(supervisor, 2)
    for child in supervisor.children:
        child.ready_at = time.monotonic()  # as if each had written its ready line
    victim = supervisor.children[0]
    victim.workers.append(("host:1:abc", "sqlite:///unused.db"))
    os.kill(victim.process.pid, signal.SIGKILL)
    thread.join(30)
    assert not thread.is_alive()
    assert released == [[("host:1:abc", "sqlite:///unused.db")]]
    assert code == [0]
    assert supervisor.children == []


def test_a_child_killed_after_the_stop_is_counted() -> None:
    """After the stop, a child that ends by anything but the forwarded signal (here SIGKILL
    before it could exit) makes the supervisor exit non-zero."""
    supervisor = Supervisor(SLEEPER, release=None)
    thread, code = run_in_thread(supervisor, 1)
    child = supervisor.children[0]
    supervisor.stopping = True  # the stop, without forwarding: the child is then SIGKILLed
    os.kill(child.process.pid, signal.SIGKILL)
    thread.join(30)
    assert code == [signal.SIGKILL]


def test_a_child_killed_just_before_the_stop_is_not_counted() -> None:
    """A child SIGKILLed a moment before the SIGTERM, its death not yet seen by the supervisor's
    poll: it died before the stop (a crash, restarted were it not for the stop), so the
    supervisor still exits 0 once the others stopped on the forwarded signal (it exited 9)."""
    supervisor = Supervisor(SLEEPER, release=None)
    supervisor.children = [Child.start(SLEEPER, i) for i in range(2)]
    for child in supervisor.children:
        child.ready_at = time.monotonic()
    victim = supervisor.children[0].process.pid
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while (stat := Path(f"/proc/{victim}/stat").read_text())[stat.rfind(")") + 2] != "Z":
        assert time.monotonic() < deadline, "the victim never exited"
        time.sleep(0.01)  # exited, not yet reaped: the supervisor has not seen it
    supervisor.forward(signal.SIGTERM, None)
    assert supervisor.run(0) == 0
    assert supervisor.children == []


class StopWhileStarting(Supervisor):
    """The stop signal lands while the child of ``index`` is being started (its Popen takes a
    moment, longer on a loaded machine): the handler runs before that child is listed."""

    stop_at: int = 1

    def start(self, index: int) -> Child:
        if index == self.stop_at:
            self.forward(signal.SIGTERM, None)
        return super().start(index)


def stopped_in_time(supervisor: Supervisor, processes: int) -> list[int]:
    """``supervisor.run(processes)`` on a thread; its exit code, or a failure naming the
    children left running (they are killed, so a failure leaves nothing behind)."""
    code: list[int] = []
    thread = threading.Thread(target=lambda: code.append(supervisor.run(processes)), daemon=True)
    thread.start()
    thread.join(30)
    left = [c.process.pid for c in supervisor.children if c.process.poll() is None]
    for child in supervisor.children:
        child.process.kill()
    assert not thread.is_alive(), f"the stop never reached children {left}"
    return code


def test_a_stop_while_a_child_starts_reaches_that_child() -> None:
    """A SIGTERM handled while the second child is being started: that child is sent it once
    listed, and the supervisor exits 0 (it waited for ever on a child that never heard it)."""
    supervisor = StopWhileStarting(SLEEPER, release=None)
    assert stopped_in_time(supervisor, 2) == [0]
    assert supervisor.children == []


def test_a_stop_while_a_crashed_child_restarts_reaches_the_new_one() -> None:
    """The same for a restart: a ready child crashes, its replacement is being started when
    the stop is handled; the replacement is stopped too."""
    supervisor = StopWhileStarting(SLEEPER, release=None, backoff=Backoff(first_s=0.0))
    supervisor.stop_at = -1  # not during the first start
    thread, code = run_in_thread(supervisor, 1)
    first = supervisor.children[0]
    first.ready_at = time.monotonic()
    supervisor.stop_at = first.index  # its restart takes the same index
    os.kill(first.process.pid, signal.SIGKILL)
    thread.join(30)
    left = [c.process.pid for c in supervisor.children if c.process.poll() is None]
    for child in supervisor.children:
        child.process.kill()
    assert not thread.is_alive(), f"the stop never reached children {left}"
    assert supervisor.restarts == 1  # the replacement was started, then stopped
    assert code == [0]


def test_a_second_stop_is_forwarded_once_more_to_each_child() -> None:
    """Two SIGTERMs to the supervisor are two to each child (the second skips the drain), and
    a child listed after both is sent both, never one twice."""
    supervisor = Supervisor(SLEEPER, release=None)
    supervisor.children = [Child.start(SLEEPER, 0)]
    supervisor.forward(signal.SIGTERM, None)
    supervisor.forward(signal.SIGTERM, None)
    late = Child.start(SLEEPER, 1)
    supervisor.children.append(late)
    supervisor.send_owed()
    supervisor.send_owed()
    assert [c.signalled for c in supervisor.children] == [2, 2]
    assert supervisor.run(0) == 0
