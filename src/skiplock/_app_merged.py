"""The person's reads that have no job id to route by, read from every database of the App
(or the one named) and merged into the order the one-database read gives (issue 46, "one
view"): the audit trail, the dead groups, the schedules' last runs, the blocked and the
busiest concurrency keys.

Why a merge rather than one database's answer: each of these rows lives where its jobs (or
the action) went, so the App's own database alone hides what the other databases hold. A
limit is counted in total: each database is asked for at most the limit, the merge keeps the
first ``limit`` of the whole. Every record names its database (``.database``); a
one-database App reads its one database, and what it returns is what it returned before."""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar, cast

from ._app_databases import Databases
from ._backends import Backend
from ._backends.params import AuditListParams, JobBusiestKeysParams
from ._job import AuditEntry, BlockedKey, CronRun, DeadGroup, KeyLoad
from .errors import ConfigurationError

R = TypeVar("R")


async def _each(
    databases: Databases, database: str | None, read: Callable[[Backend], Awaitable[list[R]]]
) -> list[list[R]]:
    """``read`` of each database chosen, in the order their ids run, each record given its
    database's name."""
    parts: list[list[R]] = []
    for name in databases.chosen(database):
        rows = await read(await databases(name))
        parts.append([dataclasses.replace(cast(Any, r), database=name) for r in rows])
    return parts


def _merged(parts: Iterable[list[R]], key: Callable[[R], Any], limit: int) -> list[R]:
    """Each database's rows (each already in ``key`` order) as one list in that order, the
    first ``limit``; a tie keeps the database order (the App's own first)."""
    return list(heapq.merge(*parts, key=key))[:limit]


async def audit_trail(
    databases: Databases, limit: int, before_id: int | None, database: str | None
) -> list[AuditEntry]:
    """Newest first, by time (audit ids are each database's own: they order one database's
    trail, not two); ``before_id`` pages one database's trail, so several need ``database``."""
    if before_id is not None and database is None and databases.several:
        raise ConfigurationError(
            "audit_trail(before_id=...): an audit id is one database's; give database= too "
            f"(one of: {', '.join(databases.names())})"
        )
    params = AuditListParams(limit, before_id)
    parts = await _each(databases, database, lambda b: b.audit_list(params))
    return _merged(parts, lambda e: (-_ts(e.at), -e.id), limit)


def _ts(at: datetime) -> float:
    return at.timestamp()


async def dead_groups(databases: Databases, limit: int, database: str | None) -> list[DeadGroup]:
    """The largest groups first, each database's apart (a requeue by filter acts on every
    database, a group's ``last_id`` opens in its own)."""
    parts = await _each(databases, database, lambda b: b.job_dead_groups(limit))
    return _merged(parts, lambda g: (-g.count, g.task, g.error), limit)


async def cron_last_runs(databases: Databases, database: str | None) -> list[CronRun]:
    """Each schedule's most recent slot over the databases (a schedule whose owner moved to
    another database has slots in both: the latest is its last run), by schedule name."""
    parts = await _each(databases, database, lambda b: b.cron_last_runs())
    if len(parts) == 1:
        return parts[0]
    latest: dict[str, CronRun] = {}
    for rows in parts:
        for run in rows:
            seen = latest.get(run.schedule)
            if seen is None or run.slot > seen.slot:
                latest[run.schedule] = run
    return [latest[name] for name in sorted(latest)]


async def blocked_keys(databases: Databases, limit: int, database: str | None) -> list[BlockedKey]:
    """Oldest dead job first: database by database is the order of the ids."""
    parts = await _each(databases, database, lambda b: b.job_blocked_keys(limit))
    return _merged(parts, lambda k: k.dead_job_id, limit)


async def busiest_keys(
    databases: Databases, params: JobBusiestKeysParams, database: str | None
) -> list[KeyLoad]:
    """The most running first, then the most ready, the most pending (a key of a split
    queue is one database's; the same key in two databases is two rows, each naming its)."""
    parts = await _each(databases, database, lambda b: b.job_busiest_keys(params))
    return _merged(parts, lambda k: (-k.running, -k.ready, -k.pending, k.key), params.limit)
