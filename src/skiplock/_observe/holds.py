"""The words for a hold of the storage's upkeep (``StorageHold``): who holds it, for how long,
what it costs, and what a person does about it. One place, so the worker's log line and
``skiplock stats`` say the same thing.

A holder's application name and query are whatever its client sent: every one passes through
``printable`` here, so an escape sequence in them is shown, never acted on, and a query's
line breaks do not break the log line."""

from __future__ import annotations

from .._job import StorageHold, StorageHolder
from .._printable import printable

DOCS = "docs/operations/storage.md"
"""Where the log lines send a person for more."""


def duration(seconds: float) -> str:
    """``12 s``, ``3.0 min``, ``2.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def size(n: int) -> str:
    """``412 MB`` (MiB, as ``ls -h`` counts), ``96 KB`` under one."""
    if n < 1 << 20:
        return f"{n / 1024:.0f} KB"
    return f"{n / (1 << 20):.0f} MB"


def describe(holder: StorageHolder) -> str:
    """``pid 4242 (app 'psql', idle in transaction, transaction open 3.0 min, last query
    'SELECT ...' 2.9 min ago)``, or a slot's or a prepared transaction's like it."""
    name = printable(holder.name)
    if holder.kind == "replication slot":
        facts = [holder.state or "?"]
        if holder.pid is not None:
            facts.append(f"walsender pid {holder.pid}")
        if holder.xmin_age is not None:
            facts.append(f"its xmin {holder.xmin_age:,} transactions back")
        return f"replication slot '{name}' ({', '.join(facts)})"
    if holder.kind == "prepared transaction":
        ago = "" if holder.xact_age_s is None else f" {duration(holder.xact_age_s)} ago"
        return f"prepared transaction '{name}' (prepared{ago})"
    facts = [f"app '{name}'", printable(holder.state or "state unknown")]
    if holder.xact_age_s is not None:
        facts.append(f"transaction open {duration(holder.xact_age_s)}")
    if holder.query:
        facts.append(f"last query '{printable(holder.query)}'")
    return f"pid {holder.pid} ({', '.join(facts)})"


def remedy(holder: StorageHolder) -> str:
    """What a person does to let the upkeep go on."""
    if holder.kind == "replication slot":
        if holder.state == "inactive":
            return "drop the slot if its standby is gone (pg_drop_replication_slot)"
        return "end the standby's long query, or turn its hot_standby_feedback off"
    if holder.kind == "prepared transaction":
        return "COMMIT PREPARED or ROLLBACK PREPARED it"
    return "end that transaction"


def others(hold: StorageHold | None) -> str:
    """`` and 2 more`` past the first holder ("" for none)."""
    more = 0 if hold is None else len(hold.holders) - 1
    return f" and {more} more" if more > 0 else ""


def relations(names: tuple[str, ...]) -> str:
    """``skiplock_jobs_live_s1`` (schema left off: the lines name skiplock's own tables)."""
    return ", ".join(printable(n.rsplit(".", 1)[-1].strip('"')) for n in names)


def who(holder: StorageHolder) -> str:
    """``pid 4242``, ``replication slot 'standby1'``, ``prepared transaction 'tx1'``."""
    if holder.kind == "session":
        return f"pid {holder.pid}"
    return f"{holder.kind} '{printable(holder.name)}'"
