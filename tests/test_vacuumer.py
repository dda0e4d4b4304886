"""The worker's vacuumer and rotator (``_worker/services.py``): the vacuumer's pace as a table,
the two lines it logs when vacuums stop removing dead versions (a held MVCC horizon) and start
again, the rotator's back-off. The real vacuum and rotation are tested on PostgreSQL in
tests/backends/test_storage.py."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from skiplock import WorkerConfig
from skiplock._backends.params import HotVacuum, Rotation
from skiplock._backends.postgres.storage import holders as postgres_holders
from skiplock._backends.postgres.storage import partitions as postgres_storage
from skiplock._backends.sqlite import SQLiteBackend
from skiplock._job import StorageHold, StorageHolder
from skiplock._observe.holds import describe, duration, others, who
from skiplock._observe.meter import Meter
from skiplock._worker.holds import HoldLog
from skiplock._worker.services import (
    ROTATE_MAX_PAUSE_S,
    VACUUM_MAX_PAUSE_S,
    Rotator,
    Vacuumer,
    VacuumPace,
)

REMOVED = HotVacuum(20_000, 300)
KEPT = HotVacuum(20_000, 19_000)
HALF = HotVacuum(20_000, 10_000)
BUSY = HotVacuum(40_000, 43_000, removed=38_000, kept=2_000)
"""A clean table at 20,000 jobs a second: more died while the vacuum ran than were there
when it began, but the vacuum itself removed nearly all it found (a false "held" once)."""
HELD = HotVacuum(3_000, 3_100, removed=0, kept=3_000)
HELD_SOME = HotVacuum(30_000, 12_000, removed=8_000, kept=9_000)
"""By the statistics most went, but the vacuum kept more than it removed."""
SKIP = HotVacuum(20_000, 20_000, skipped=True)
"""Another vacuum held the table (autovacuum): nothing done, nothing to judge."""

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
    ([BUSY], 1.0),
    ([BUSY] * 5, 1.0),
    ([HELD], 2.0),
    ([HELD_SOME], 2.0),
    ([HELD, HELD, BUSY], 1.0),
    ([SKIP], 1.0),
    ([HELD, SKIP], 2.0),  # neither backs off further nor ends the hold
    ([HELD, HELD, SKIP, SKIP], 4.0),
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


async def test_a_held_horizon_is_logged_once_and_its_end_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nobody named (SQLite names no horizon's holder): the unnamed warning, once."""
    backend = SQLiteBackend("sqlite:///unused.db")
    vacuumer = Vacuumer(backend, WorkerConfig(vacuum_interval_s=1.0))
    with caplog.at_level(logging.INFO, logger="skiplock.worker"):
        for look in (REMOVED, KEPT, KEPT, KEPT, KEPT, REMOVED, None):
            await vacuumer.after(look)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 2, lines
    assert "left 19000 of 20000 dead row versions, 3 times in a row" in lines[0]
    assert "backend_xmin" in lines[0]
    assert lines[1] == "vacuum of the live jobs removes dead row versions again"
    assert vacuumer.vacuums == 6


async def test_the_warning_names_what_the_vacuum_itself_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = SQLiteBackend("sqlite:///unused.db")
    vacuumer = Vacuumer(backend, WorkerConfig(vacuum_interval_s=1.0))
    with caplog.at_level(logging.INFO, logger="skiplock.worker"):
        for look in (BUSY, BUSY, SKIP, BUSY, HELD, SKIP, HELD, HELD, HELD, SKIP, BUSY):
            await vacuumer.after(look)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert lines == [
        "vacuum of the live jobs kept 3000 dead row versions it could not remove yet "
        "(removed 0), 3 times in a row: an old transaction holds the database's MVCC horizon "
        "(see pg_stat_activity.backend_xmin); claims slow down until it ends",
        "vacuum of the live jobs removes dead row versions again",
    ], lines
    assert vacuumer.vacuums == 8  # the skipped looks vacuumed nothing


async def test_a_short_hold_is_not_worth_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Autovacuum's ANALYZE of a big history partition holds the horizon a second or two each
    minute: a vacuum or two kept their dead versions, then the next removed them. The pace
    backs off meanwhile; nothing is logged."""
    backend = SQLiteBackend("sqlite:///unused.db")
    vacuumer = Vacuumer(backend, WorkerConfig(vacuum_interval_s=1.0))
    with caplog.at_level(logging.INFO, logger="skiplock.worker"):
        pauses = [await vacuumer.after(look) for look in (BUSY, HELD, HELD, BUSY, HELD, SKIP, BUSY)]
    assert pauses == [1.0, 2.0, 4.0, 1.0, 2.0, 2.0, 1.0]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO] == []


PG15_LIVE = (
    'finished vacuuming "db.s.skiplock_jobs_live": index scans: 1\n'
    "pages: 0 removed, 14 remain, 14 scanned (100.00% of total)\n"
    "tuples: 120 removed, 2000 remain, 1000 are dead but not yet removable\n"
    "removable cutoff: 27379, which was 2 XIDs old when operation ended\n"
    "index scan needed: 5 pages from table (35.71% of total) had 900 dead item identifiers "
    "removed\n"
)
PG15_TOAST = (
    'finished vacuuming "db.pg_toast.pg_toast_1": index scans: 0\n'
    "tuples: 0 removed, 0 remain, 77 are dead but not yet removable\n"
)
PG14_LIVE = (
    '"skiplock_jobs_live": found 3000 removable, 2500 nonremovable row versions in 40 out of '
    "40 pages\nDETAIL: 2500 dead row versions cannot be removed yet, oldest xmin: 751"
)


@pytest.mark.parametrize(
    ("messages", "report"),
    [
        (['vacuuming "db.s.skiplock_jobs_live"', PG15_TOAST, PG15_LIVE], (1_020, 1_000)),
        ([PG14_LIVE], (3_000, 2_500)),
        ([PG15_LIVE.replace("had 900 dead item identifiers removed", "")], (120, 1_000)),
        (['skipping vacuum of "skiplock_jobs_live" --- lock not available'], (-1, -1)),
        (['skipping "skiplock_jobs_live" --- only table or database owner can vacuum it'], None),
        (["vacuum de « skiplock_jobs_live » terminé"], None),  # another lc_messages
        # the segments' reports summed; one held by a truncate is skipped, the rest counted
        (
            [
                PG15_LIVE.replace("skiplock_jobs_live", "skiplock_jobs_live_s0"),
                'skipping vacuum of "skiplock_jobs_live_s1" --- lock not available',
                PG15_LIVE.replace("skiplock_jobs_live", "skiplock_jobs_live_long"),
            ],
            (2_040, 2_000),
        ),
    ],
)
def test_a_vacuums_own_report_is_read(messages: list[str], report: tuple[int, int] | None) -> None:
    """What ``VACUUM VERBOSE`` says it removed (dead tuples and the dead line pointers pruning
    left) and kept, from PostgreSQL 15's report (the TOAST table's ignored) or 13/14's."""
    assert postgres_storage.vacuum_report(messages) == report


@pytest.mark.parametrize(
    ("look", "took_s", "pause"),
    [
        (REMOVED, 0.05, 1.0),  # a quick vacuum: the interval
        (REMOVED, 0.5, 4.5),  # half a second of vacuum: 4.5 s of rest, a tenth of the time
        (BUSY, 0.3, 2.7),
        (KEPT, 0.1, 2.0),  # held: the doubled pause is already longer
        (REMOVED, 10.0, VACUUM_MAX_PAUSE_S),  # never past the longest pause
        (None, 5.0, 1.0),  # no vacuum ran (a slow statistics read says nothing of it)
    ],
)
def test_the_vacuums_take_at_most_a_tenth_of_the_time(
    look: HotVacuum | None, took_s: float, pause: float
) -> None:
    """At 20,000 jobs a second a vacuum every second took the claims' CPU on two cores."""
    assert VacuumPace(1.0).after(look, took_s) == pytest.approx(pause)


def test_the_rotator_backs_off_while_a_segment_is_held_and_counts_what_it_did(
    tmp_path: Path,
) -> None:
    """Each held turn doubles the pause (a row a worker held, a lock past its short timeout),
    up to ROTATE_MAX_PAUSE_S; a detach or another session's turn resets it, and generations
    waiting for their readers slow nothing."""
    rotator = Rotator(SQLiteBackend(f"sqlite:///{tmp_path}/r.db"), WorkerConfig())
    held = Rotation(1, moved=2, held=True)
    detached = Rotation(2, moved=5, detached=True, pending=3, dropped=2)
    pauses = [rotator.look(look) for look in [held, held, held, detached]]
    assert rotator.pending == 3  # waiting for readers: no back-off
    pauses += [rotator.look(look) for look in [None, held]]
    assert pauses == [1.0, 2.0, 4.0, 0.5, 0.5, 1.0]
    assert (rotator.moved, rotator.detached, rotator.dropped) == (2 * 4 + 5, 1, 2)
    for _ in range(20):
        pause = rotator.look(held)
    assert pause == ROTATE_MAX_PAUSE_S


def holder(pid: int, query: str = "SELECT 1", app: str = "psql") -> StorageHolder:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return StorageHolder(
        "session", pid, app, "idle in transaction", start, start, start, 190.0, None, query
    )


def test_each_holder_is_named_once_and_the_end_once(caplog: pytest.LogCaptureFixture) -> None:
    """A holder met at every look is named at the first; the next one (the first ended, the
    second was behind it) gets its own line; a look that names nobody says nothing more; the
    end is said once, naming the last holder; the gauge reads the hold meanwhile."""
    meter = Meter()
    now = [100.0]
    words = HoldLog("lock", meter, clock=lambda: now[0])
    first, second = holder(4242), holder(4343)

    def say(h: StorageHolder, hold: StorageHold) -> str:
        return f"held by {describe(h)}{others(hold)}"

    with caplog.at_level(logging.INFO, logger="skiplock.worker"):
        for found in (first, first, None, first, second, second):
            hold = None if found is None else StorageHold("lock", (found, second))
            words.held(90.0, hold, say, None, dead_versions=7)
            now[0] += 1.0
        assert meter.holds["lock"].held_s(now[0]) == 16.0
        assert meter.holds["lock"].dead_versions == 7
        words.released(lambda h, s: f"released by {who(h) if h else '?'} after {duration(s)}")
        words.released(lambda h, s: "again")
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        (
            "WARNING",
            "held by pid 4242 (app 'psql', idle in transaction, transaction open 3.2 min, "
            "last query 'SELECT 1') and 1 more",
        ),
        (
            "WARNING",
            "held by pid 4343 (app 'psql', idle in transaction, transaction open 3.2 min, "
            "last query 'SELECT 1') and 1 more",
        ),
        ("INFO", "released by pid 4343 after 16 s"),
    ]
    assert meter.holds["lock"].held_s(now[0]) == 0.0


def test_a_holders_query_is_short_one_line_and_shown_not_acted_on() -> None:
    """Whitespace runs become one space (a formatted statement stays one log line), the text
    is cut to 200 characters, and its control characters are shown as escapes."""
    query = "SELECT *\n  FROM skiplock_jobs\t WHERE note = '\x1b]0;pwned\x07'" + " AND x" * 60
    short = postgres_holders.short_query(query)
    assert len(short) == 200 and short.endswith("…") and "\n" not in short
    assert short.startswith("SELECT * FROM skiplock_jobs WHERE note = '\x1b]0;pwned\x07' AND x")
    said = describe(holder(1, short, app="rep\x9bort"))
    assert "\x1b" not in said and "\\x1b]0;pwned\\x07" in said and "app 'rep\\x9bort'" in said
    assert postgres_holders.short_query(None) == "" and postgres_holders.short_query(" a ") == "a"
