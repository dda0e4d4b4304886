"""The worker's vacuumer (``_worker/services.py``): its pace as a table, and the two lines it
logs when vacuums stop removing dead versions (a held MVCC horizon) and start again. The real
vacuum is tested on PostgreSQL in tests/backends/test_storage.py."""

from __future__ import annotations

import logging

import pytest

from skiplock import WorkerConfig
from skiplock._backends.base import HotVacuum
from skiplock._backends.sqlite import SQLiteBackend
from skiplock._worker.services import VACUUM_MAX_PAUSE_S, Vacuumer, VacuumPace

REMOVED = HotVacuum(20_000, 300)
KEPT = HotVacuum(20_000, 19_000)
HALF = HotVacuum(20_000, 10_000)

PACE = [
    # (looks, pause after the last one)
    ([None], 1.0),
    ([REMOVED], 1.0),
    ([HALF], 1.0),  # half removed: a busy table, not a held one
    ([KEPT], 2.0),
    ([KEPT, KEPT], 4.0),
    ([KEPT] * 10, VACUUM_MAX_PAUSE_S),
    ([KEPT, KEPT, REMOVED], 1.0),
    ([KEPT, KEPT, None], 1.0),
]


@pytest.mark.parametrize(("looks", "pause"), PACE)
def test_the_pace_backs_off_only_while_vacuums_leave_most_behind(
    looks: list[HotVacuum | None], pause: float
) -> None:
    pace = VacuumPace(1.0)
    for look in looks:
        last = pace.after(look)
    assert last == pause and pace.pause_s == pause
    assert pace.held is (pause > 1.0)


def test_a_held_horizon_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    backend = SQLiteBackend("sqlite:///unused.db")
    vacuumer = Vacuumer(backend, WorkerConfig(vacuum_interval_s=1.0))
    with caplog.at_level(logging.INFO, logger="skiplock.worker"):
        for look in (REMOVED, KEPT, KEPT, KEPT, REMOVED, None):
            vacuumer.look(look)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 2, lines
    assert "left 19000 of 20000 dead row versions" in lines[0]
    assert "backend_xmin" in lines[0]
    assert lines[1] == "vacuum of the live jobs removes dead row versions again"
    assert vacuumer.vacuums == 5
