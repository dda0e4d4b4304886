"""Who holds PostgreSQL's storage upkeep back: the sessions holding a lock the live segments'
rotation needs, and those holding the MVCC horizon the live jobs' vacuum is stuck behind
(docs/operations/storage.md, "When the upkeep is held back").

Read from ``pg_locks``, ``pg_stat_activity``, ``pg_replication_slots`` and
``pg_prepared_xacts``, each statement on its own (no transaction of ours stays open: a
statistics reading must not become a holder itself). A role sees the state, query and
transaction times of its own sessions only, unless it has ``pg_read_all_stats`` (or is a
superuser): another role's sessions show none of them, cannot be told from a passing claim,
and are left out.

The rotation's relations are asked for by name (``rotation_relations``: the retired
generations whose detach waits for their readers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ...._job import StorageHold, StorageHolder
from . import QUERIES
from .partitions import DEAD_LIVE
from .rotation import TABLES

QUERY_CHARS = 200
"""The most characters of a holder's last statement kept (its whitespace runs made one
space first)."""

_SPACES = re.compile(r"[ \t\n\r\f\v]+")

HIDDEN = "<insufficient privilege>"
"""What ``pg_stat_activity.query`` says of a session this role may not read."""

OLD_SESSIONS = QUERIES["OLD_SESSIONS"]
"""Whether any transaction of this database is ``$1`` seconds old (or prepared): without
one nothing can be named, and ``LOCK_HOLDERS`` need not read ``pg_locks`` (a read of every
lock on the server, which takes the lock manager's partition locks)."""

LOCK_HOLDERS = QUERIES["LOCK_HOLDERS"]
"""The other sessions holding a granted lock on any of the relations ``$1`` (names, schema
qualified; a missing one is left out) whose transaction began ``$2`` seconds ago or more,
and the prepared transactions holding one (a lock of a prepared transaction is listed under
the virtual transaction ``-1/xid``, with no pid), oldest transaction first. Any lock: the
rotation's truncate needs ACCESS EXCLUSIVE, which every other mode conflicts with."""

HORIZON_HOLDERS = QUERIES["HORIZON_HOLDERS"]
"""What holds the MVCC horizon of this database's tables back, the furthest first
(``xmin_age``, in transactions): its sessions with a transaction id or a snapshot whose
transaction began ``$1`` seconds ago or more; prepared transactions as old; replication
slots with an ``xmin`` (a standby's ``hot_standby_feedback``), and walsenders carrying one
without a slot. A slot or a walsender has no transaction to date it by, so an active one is
named only when it holds the horizon further back than every transaction of this database
younger than ``$1`` (a standby's long query, not its feedback's ordinary lag); an inactive
slot's ``xmin`` never moves, so it always is. Not ``catalog_xmin`` (a logical slot's): it
holds only the system catalogs' horizon, not the job tables'. Sessions of other databases
hold only the shared catalogs' horizon, and are not asked about."""

DEAD_IN = QUERIES["DEAD_IN"]
"""Dead row versions in the relations ``$1`` (names), by the statistics."""

HORIZON_HOLDERS_SHOWN = 5
"""How many of the horizon's holders a reading names (the furthest back first)."""


async def rotation_relations(conn: Any, schema: str) -> list[str]:
    """The relations the live generations' rotation waits on, schema-qualified: the retired
    generations' tables and wrappers whose detach is pending (it waits for the sessions that
    locked them before it, rotation.py)."""
    rows = await conn.fetch(TABLES, f'"{schema}"')
    return [f'"{schema}".{r["relname"]}' for r in rows if r["pending"]]


def short_query(text: str | None) -> str:
    """A statement as a holder's record keeps it: whitespace runs made one space, cut to
    QUERY_CHARS characters at most (an ellipsis where it was cut)."""
    if not text:
        return ""
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) <= QUERY_CHARS:
        return flat
    return flat[: QUERY_CHARS - 1] + "…"


def _holder(row: Any) -> StorageHolder:
    return StorageHolder(
        kind=row["kind"],
        pid=row["pid"],
        name=row["name"] or "",
        state=row["state"],
        backend_start=row["backend_start"],
        xact_start=row["xact_start"],
        query_start=row["query_start"],
        xact_age_s=None if row["xact_age_s"] is None else max(0.0, float(row["xact_age_s"])),
        xmin_age=row["xmin_age"],
        query=short_query(row["query"]),
        relations=tuple(sorted(row["relations"] or ())),
    )


async def lock_holders(conn: Any, relations: Sequence[str], min_age_s: float) -> StorageHold | None:
    """The sessions (and prepared transactions) of at least ``min_age_s`` holding a lock on
    any of ``relations``, oldest first, and the dead versions waiting in the relations they
    hold; None: none does."""
    if not await conn.fetchval(OLD_SESSIONS, min_age_s):
        return None
    rows = await conn.fetch(LOCK_HOLDERS, list(relations), min_age_s)
    holders = tuple(_holder(r) for r in rows if r["query"] != HIDDEN)
    if not holders:
        return None
    held = tuple(sorted({name for h in holders for name in h.relations}))
    dead = int(await conn.fetchval(DEAD_IN, list(held)) or 0)
    return StorageHold(
        "lock", holders, held_s=holders[0].xact_age_s, dead_versions=dead, relations=held
    )


async def horizon_holders(conn: Any, live: str, min_age_s: float) -> StorageHold | None:
    """What holds the MVCC horizon back (sessions, slots, prepared transactions), the
    furthest back first, and the dead versions waiting in ``live`` (the live jobs' partition,
    its segments summed); None: nothing does."""
    rows = await conn.fetch(HORIZON_HOLDERS, min_age_s, HORIZON_HOLDERS_SHOWN)
    holders = tuple(_holder(r) for r in rows if r["query"] != HIDDEN)
    if not holders:
        return None
    dead = int(await conn.fetchval(DEAD_LIVE, live) or 0)
    return StorageHold("horizon", holders, held_s=holders[0].xact_age_s, dead_versions=dead)
