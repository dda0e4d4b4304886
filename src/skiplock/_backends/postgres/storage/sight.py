"""Which live segments the ordinary claims name: what no new query reads stays out of their plans.

Why (issue 44; docs/design.md, "Storage: segments no reader can hold"): a retired generation
whose readers still hold it stays attached to the live partition as an empty wrapper until they
are gone, and a plan of the job table expands every one. With 64 waiting under a reader, a
claim took 5.5 ms to plan; with its live segments named as constants in its text, PostgreSQL
left the rest out as it planned, and it took 0.78 ms.

So the ordinary claims (``statements.named_claim``) name the long segment, every generation a
new query reads (its table attached under its wrapper and the wrapper under the live partition,
no detach pending on either: read from the catalog), and the one the pointer names. A job goes
only to the pointer's generation (the column's default; the trigger of a row coming back to the
live partition) or stays in the segment it was claimed from, so no segment outside that set
holds a job a claim could take, but one the pointer moved to after the set was read. Each claim
returns the pointer it ran with (``CLAIM_WITH_POINTER``): when the pointer is not in the set, the
set is read again, and a claim that came back short claims the rest at once from the new set,
so a job in a new generation waits one claim round at most. The set is read again every
``SIGHT_MAX_AGE_S`` too, so generations gone since leave the text.

The pointer is read before the catalog: a generation attached after the catalog read is one the
pointer had not reached when it was read (a generation is attached before the pointer moves to
it), so the claim's pointer tells of it.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any

from ...sql_files import with_schema
from . import QUERIES
from .generations import LONG_SEGMENT

SIGHT_MAX_AGE_S = 30.0
"""How long a set of named segments serves before it is read again although no claim's pointer
asked for it (a generation detached since only leaves the claims' text then)."""

IN_SIGHT = QUERIES["LIVE_IN_SIGHT"]
"""The generations' tables a new query reads (``{s}``: the schema)."""

_TABLE = re.compile(r"^skiplock_jobs_live_s(\d+)$")


@dataclass
class Sight:
    """The live segments this backend's ordinary claims name, and when they were read."""

    segments: tuple[int, ...] = ()
    read_at: float = -math.inf

    def current(self) -> tuple[int, ...] | None:
        """The segments to name, or None when they must be read (never yet, too old, or a
        claim's pointer fell outside them)."""
        if not self.segments or time.monotonic() - self.read_at >= SIGHT_MAX_AGE_S:
            return None
        return self.segments

    def covers(self, pointer: int | None) -> bool:
        """Whether a claim's pointer is among the named segments; if not, they are read again
        before the next claim."""
        if pointer is None or pointer in self.segments:
            return True
        self.read_at = -math.inf
        return False


async def read_sight(pool: Any, schema: str) -> tuple[int, ...]:
    """The pointer, then the generations in sight (module docstring: why in that order); with
    the long segment, sorted."""
    pointer = await pool.fetchval(with_schema(QUERIES["POINTER_NOW"], schema))
    rows = await pool.fetch(with_schema(IN_SIGHT, schema))
    found = {int(m.group(1)) for r in rows if (m := _TABLE.match(r["relname"]))}
    return tuple(sorted({LONG_SEGMENT, int(pointer), *found}))


async def refresh(sight: Sight, pool: Any, schema: str) -> tuple[int, ...]:
    """The segments to name now: ``sight``'s, read again when they must be."""
    segments = sight.current()
    if segments is None:
        sight.segments = await read_sight(pool, schema)
        sight.read_at = time.monotonic()
        segments = sight.segments
    return segments
