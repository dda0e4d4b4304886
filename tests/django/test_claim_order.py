"""The order tasks start in is the order Django's backends promise (priority, then
``run_after``, then enqueue time), whether the worker claims one task at a time or several
ahead of its free slots (issue 42 item 9: a task whose ``run_after`` had passed ran after a
task enqueued before that time, once both were claimed together). Both databases."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.core.management import call_command
from django.utils import timezone

from .project.demo import tasks


def test_a_passed_run_after_keeps_its_place_when_claimed_ahead(tmp_path: Path) -> None:
    """One slot: a first, high-priority task runs alone (nothing is claimed ahead before a
    task finished); then the rest are claimed together, ahead of the one slot. The task
    rescheduled to five minutes ago was due before the three enqueued just now, so it runs
    first, as it would have if claimed alone."""
    log = tmp_path / "order"
    first = tasks.append_line.using(priority=10)
    first.enqueue(str(log), "first", 0.0)
    for name in ("now-1", "now-2", "now-3"):
        tasks.append_line.enqueue(str(log), name, 0.0)
    due = tasks.append_line.using(run_after=timezone.now() - timedelta(minutes=5))
    due.enqueue(str(log), "due-5-minutes-ago", 0.0)
    call_command(
        "concurrent_worker", "--concurrency=1", "--burst", "--no-scheduler", "--interval=0.05"
    )
    assert log.read_text().split() == ["first", "due-5-minutes-ago", "now-1", "now-2", "now-3"]
