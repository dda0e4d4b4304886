"""The history partitions' upkeep on PostgreSQL: one a day made ahead, whole expired ones dropped.

No pg_partman, no pg_cron: every worker's pruner calls these, and a transaction-level advisory
lock (``pg_try_advisory_xact_lock``, which a transaction pooler keeps to one exchange) lets one
of them do the DDL while the rest go on. Every DDL runs under a short ``lock_timeout`` and is
retried a few times, then left to the next tick: a session holding a lock on a partition (a long
report, a ``pg_dump``) makes the DDL give up, never queues every completion behind it. Claims
never wait on it at all: they name the live partition only (generations.py).

Partition names carry their bounds (UTC days), so the upkeep reads names, never the text of a
partition bound: ``skiplock_jobs_done_p20261203`` holds rows finished that day,
``skiplock_jobs_done_to_20261204`` (the table an upgrade attached) everything before that day.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

from ...sql_files import fill_names, with_schema
from . import QUERIES

log = logging.getLogger("skiplock.storage")

DAYS_AHEAD = 2
"""History partitions kept made beyond today (UTC): a worker may stop for two days before a
finished job lands in the default partition (still kept, found and pruned; moved out when its
day's partition is made)."""

LOCK_TIMEOUT_MS = 100
"""How long a DDL waits for its lock before giving up (and the completions queued behind it
wait no longer than this)."""

TRIES = 5
"""How many times a DDL that timed out on its lock is tried in one upkeep, 200 ms apart."""

_NAME = re.compile(r"^skiplock_jobs_done_(p|to_)(\d{8})$")

LIST_PARTITIONS = QUERIES["LIST_PARTITIONS"]

UPKEEP_LOCK = QUERIES["UPKEEP_LOCK"]

DB_NOW = QUERIES["DB_NOW"]

EXISTS = QUERIES["EXISTS"]

ALREADY = -1
"""What ``_ddl`` returns where, under the upkeep lock, the change turned out made already:
another session (a parallel ``migrate``, another worker's upkeep) made or dropped the same
partition between this one's read of the list and its turn at the lock."""


DEAD_LIVE = QUERIES["DEAD_LIVE"]
"""Dead row versions in the live partition's segments in the claims' sight (a generation whose
detach waits for its readers is left out: no claim reads it, and no vacuum can clear it while
they last), by the statistics (a busy session flushes its counts within a second)."""


_VACUUMED = re.compile(
    # PostgreSQL 15 and later: one INFO message when a table's vacuum ends
    r"tuples: (?P<removed>\d+) removed, \d+ remain, (?P<kept>\d+) are dead but not yet removable"
    r"(?:.*?had (?P<items>\d+) dead item identifiers removed)?",
    re.DOTALL,
)
_VACUUMED_BEFORE_15 = re.compile(
    # PostgreSQL 13 and 14: the counts in the message, the ones kept in its detail
    r"found (?P<removed>\d+) removable, \d+ nonremovable row versions.*?"
    r"(?P<kept>\d+) dead row versions cannot be removed yet",
    re.DOTALL,
)


SKIPPED = (-1, -1)
"""``vacuum_report`` when the vacuum skipped the table: another vacuum (a worker's, autovacuum)
holds its lock."""


def vacuum_report(messages: list[str]) -> tuple[int, int] | None:
    """What a ``VACUUM VERBOSE`` of the live partition said it did, summed over its segments:
    (removed, kept), kept being the dead versions it could not remove yet (an older
    transaction may still see them), and removed counting the dead line pointers earlier
    pruning left for it. None: no such line (the server speaks another language,
    ``lc_messages``, or refused: not the owner); SKIPPED when other sessions held every
    segment it found (another vacuum, a rotation's truncate)."""
    removed = kept = reports = 0
    for text in messages:
        if "skiplock_jobs_live" not in text.split("\n", 1)[0]:
            continue  # a TOAST table's report, or another message
        found = _VACUUMED.search(text) or _VACUUMED_BEFORE_15.search(text)
        if found is not None:
            items = found.groupdict().get("items")
            removed += int(found["removed"]) + int(items or 0)
            kept += int(found["kept"])
            reports += 1
    if reports:
        return removed, kept
    if any("lock not available" in text for text in messages):
        return SKIPPED
    return None


async def vacuum_live(
    conn: Any, schema: str, min_dead: int
) -> tuple[int, int, tuple[int, int] | None] | None:
    """VACUUM the live partition if ``min_dead`` dead versions wait there: (before, after,
    what the vacuum itself reported: ``vacuum_report``).

    Autovacuum visits a database once a naptime (a minute by default) whatever a table's own
    thresholds say, and at thousands of jobs a second a minute leaves hundreds of thousands of
    dead versions in the claim indexes. The table is small (pending and running rows only), so
    a vacuum of it costs milliseconds. ``SKIP_LOCKED``: while another worker (or autovacuum)
    vacuums it, this one moves on instead of queueing; ``TRUNCATE false``: the truncation of
    empty pages at its end wants an ACCESS EXCLUSIVE lock, which claims would queue behind.
    VACUUM runs outside a transaction block, one statement: fine behind a transaction pooler.
    Not the owner of the table (workers on a role of their own): the server skips it with a
    warning, and the reading after shows nothing removed.

    ``VERBOSE``: the statistics' counts before and after cannot say whether a held horizon
    kept the dead versions, since at thousands of jobs a second as many die while the vacuum
    runs (a busy, clean table read as held: a false warning, and a pause that let dead
    versions pile up); the vacuum's own report says what it removed and what it had to keep."""
    table = f'"{schema}".skiplock_jobs_live'
    before = int(await conn.fetchval(DEAD_LIVE, table) or 0)
    if before < min_dead:
        return None
    said: list[str] = []

    def listen(_: Any, message: Any) -> None:
        said.append(str(message.message))

    conn.add_log_listener(listen)
    try:
        await conn.execute(with_schema(QUERIES["LIVE_VACUUM"], schema))
        await asyncio.sleep(0)  # notices reach listeners through call_soon, ahead of this
    finally:
        # a connection that failed mid-vacuum (its session ended) went back to the pool
        # already, and refusing to remove the listener would hide why the vacuum failed
        with contextlib.suppress(asyncpg.exceptions.InterfaceError):
            conn.remove_log_listener(listen)
    after = int(await conn.fetchval(DEAD_LIVE, table) or 0)
    return before, after, vacuum_report(said)


@dataclass(frozen=True)
class Partition:
    """A history partition and the finish times it holds: [lower, upper), lower None for
    everything before upper."""

    name: str
    lower: date | None
    upper: date


def partitions(names: list[str]) -> list[Partition]:
    """The day partitions among ``names`` (the default one and strangers are left out)."""
    found = []
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue
        day = datetime.strptime(match.group(2), "%Y%m%d").replace(tzinfo=UTC).date()
        if match.group(1) == "p":
            found.append(Partition(name, day, day + timedelta(days=1)))
        else:
            found.append(Partition(name, None, day))
    return sorted(found, key=lambda p: p.upper)


def expired(parts: list[Partition], cutoff: datetime) -> list[Partition]:
    """The partitions every row of which finished before ``cutoff``: dropped whole."""
    return [p for p in parts if _midnight(p.upper) <= cutoff]


def missing(parts: list[Partition], today: date) -> list[date]:
    """The days from today to DAYS_AHEAD after it no partition holds yet."""
    covered = {p.lower for p in parts if p.lower is not None}
    latest_open = max((p.upper for p in parts if p.lower is None), default=None)
    days = [today + timedelta(days=n) for n in range(DAYS_AHEAD + 1)]
    return [d for d in days if d not in covered and (latest_open is None or d >= latest_open)]


def day_name(day: date) -> str:
    """The name of the history partition of ``day``."""
    return f"skiplock_jobs_done_p{day:%Y%m%d}"


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


DAY_CREATE = (
    "DAY_TABLE",
    "DAY_ID_INDEX",
    "DAY_FINISHED_INDEX",
    "DAY_RECLAIMED_INDEX",
    "DAY_MOVE_IN",
    "DAY_ATTACH",
)
"""A day's partition made, in the order its statements run (``storage/queries/partitions.sql``)."""

DAY_DROP = ("DAY_LOCK", "DAY_COUNT", "DAY_KEYS_RELEASE", "DAY_DROP")
"""A day's partition dropped, likewise."""


def _create_sql(schema: str, day: date) -> list[str]:
    """Make the partition of ``day`` beside the table, move in any row the default partition
    took for that day, then attach it (the attach checks the new table and the default one,
    both small; it takes SHARE UPDATE EXCLUSIVE on the parent, which completions' inserts do
    not wait on)."""
    name = day_name(day)
    names: dict[str, str | int | date] = {
        "day": name,
        "id_idx": f"{name}_id_idx",
        "finished_idx": f"{name}_finished_idx",
        "reclaimed_idx": f"{name}_reclaimed_idx",
        "lower": day,
        "upper": day + timedelta(days=1),
    }
    return [fill_names(QUERIES[statement], schema, **names) for statement in DAY_CREATE]


def _drop_sql(schema: str, name: str) -> list[str]:
    """Lock the partition first (waiting, under the lock_timeout, on any reader of it while
    holding nothing else), count its rows, release the keys its succeeded jobs kept (no row
    trigger fires for a dropped table), then drop it: the drop's lock on the history parent,
    which completions moving rows in take too, is held for milliseconds, never while waiting
    on a reader. Claims never touch the history parent."""
    return [fill_names(QUERIES[statement], schema, day=name) for statement in DAY_DROP]


async def _ddl(
    conn: Any, schema: str, statements: list[str], *, name: str, exists: bool
) -> int | None:
    """Run ``statements`` in one transaction under the upkeep lock and a short lock_timeout,
    retried while it times out; what its SELECT counted (0 without one). None: another
    session holds the upkeep, or the lock never came. ALREADY: partition ``name`` no longer
    ``exists`` as the change needs (checked under the lock: the list read before it is stale
    once another session's upkeep ran in between)."""
    for attempt in range(TRIES):
        try:
            async with conn.transaction():
                if not await conn.fetchval(UPKEEP_LOCK, schema):
                    return None
                if await conn.fetchval(EXISTS, f'"{schema}".{name}') != exists:
                    return ALREADY
                await conn.execute(fill_names(QUERIES["LOCK_TIMEOUT"], schema, ms=LOCK_TIMEOUT_MS))
                rows = 0
                counting = fill_names(QUERIES["DAY_COUNT"], schema, day=name)
                for statement in statements:
                    if statement == counting:
                        rows = int(await conn.fetchval(statement))
                    else:
                        await conn.execute(statement)
                return rows
        except asyncpg.exceptions.LockNotAvailableError:
            if attempt + 1 < TRIES:
                await asyncio.sleep(0.2)
    log.warning("storage upkeep: gave up waiting %d x %d ms for a lock", TRIES, LOCK_TIMEOUT_MS)
    return None


async def _parts(conn: Any, schema: str) -> list[Partition]:
    names = await conn.fetch(with_schema(LIST_PARTITIONS, schema))
    return partitions([r["relname"] for r in names])


async def drop_expired(conn: Any, schema: str, cutoff: datetime) -> int:
    """Drop the history partitions whose every row finished before ``cutoff``; rows removed."""
    removed = 0
    for part in expired(await _parts(conn, schema), cutoff):
        rows = await _ddl(conn, schema, _drop_sql(schema, part.name), name=part.name, exists=True)
        if rows is None:
            continue  # held, or another session keeps the upkeep: the next prune tries again
        if rows == ALREADY:
            continue  # another session dropped it (and counted its rows)
        removed += rows
        log.info("storage: dropped history partition %s (%d rows)", part.name, rows)
    return removed


async def make_ahead(conn: Any, schema: str, now: datetime, *, analyze: bool = True) -> list[str]:
    """Make the partitions from today (UTC) to DAYS_AHEAD after; the names made. ANALYZE the
    parents after a change (``analyze``): autovacuum analyses only leaf tables, and the
    planner's estimates for the partitioned ones come from it. Not at ``migrate``: an ANALYZE
    recurses into the leaves, and a live partition analysed empty (a new database) is planned
    as empty until autovacuum analyses it again, which a server with autovacuum off never
    does; left unanalysed, the planner reads its size from its pages."""
    made = []
    for day in missing(await _parts(conn, schema), now.astimezone(UTC).date()):
        name = day_name(day)
        done = await _ddl(conn, schema, _create_sql(schema, day), name=name, exists=False)
        if done is None:
            break
        if done != ALREADY:
            made.append(name)
    if made and analyze:
        await conn.execute(with_schema(QUERIES["JOBS_ANALYZE"], schema))
    return made
