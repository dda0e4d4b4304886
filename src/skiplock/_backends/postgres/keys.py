"""PostgreSQL's concurrency keys: the busiest and the blocked keys a person reads (``Keys``), and
how the keyed segment of the live partition and its claim work.

A job enqueued with ``concurrency_key`` may run only while fewer than its ``key_limit`` jobs
with that key run anywhere (docs/design.md, "Concurrency keys"). Three parts make that hold:

- **Its own segment.** Keyed jobs are written to segment 4 of the live
  partition (``skiplock_jobs_live_keyed``), never rotated, and every other segment holds
  unkeyed jobs only (a check constraint on the live partition). The ordinary claims name the
  other segments, so the planner leaves the keyed one out: a backlog of 100,000 keyed jobs
  costs an ordinary claim nothing. Every other statement (counts, stats, a person's actions)
  reads the keyed segment like any other.
- **A walk over keys.** The keyed claim visits the keys with pending jobs in (queue, key)
  order from where the previous claim stopped (a loose scan of the segment's walk index: one
  probe a key, however many jobs each has), takes at most ``limit - running`` of each, and
  orders what it found by priority, then by the key's turn, then by age. A hot key with
  100,000 ready jobs takes one turn like a key with one.
- **A lock per key, then a fresh count.** ``skiplock_key_running`` takes a transaction-level
  advisory try-lock on the key (another claimer holding it: the key is skipped, never waited
  for) and only then counts the key's running jobs, in a statement of its own: a VOLATILE
  function's statements read a snapshot taken when each begins, so the count sees every
  claim committed before the lock was free. Counting in the claim's own snapshot would let
  two claimers both see a free slot. The count is of rows, not a counter: a job that stops
  running by any path (completion, a reclaimed lease, a person's action, a worker's crash)
  frees its slot with its row.

Turns: PostgreSQL's keyed claim since migration 22: turns kept in the database, a parked job
holding its ordered key, and a walk that costs a few microseconds a key.

Why (docs/design.md, "Concurrency keys", "Turns in the database"): before, a key's turn was
its rank among the jobs one claim read, so ``key_weight`` and ``fair=False`` acted only
inside one claim's batch, and once slots freed one at a time (``--concurrency 1``, any steady
state) every key took one job a turn. Now each key has a **pass** in ``skiplock_key_turns``,
advanced at every claim by ``TURN_UNITS / key_weight`` a job, so every claim of every worker
sees how far each key got. The rule (``claim_rules.py`` holds the constants, SQLite's
``PICK`` in ``sqlite/queries/key_walk.sql`` the same rule):

- A visited key's pass is lifted to at least one turn below the highest pass among the keys
  the claim visits (a key new to the table, or back after it had no live job, or one whose
  pass fell behind while it was passed over, starts its turn at once, and takes no more
  than one turn ahead of the others). A key's row goes with its last live job (migration 25,
  ``migrations/0025.sql``), so a key back from idle is a new key: it keeps no pass from
  before, neither the turns it was behind nor those it was ahead.
- Its ready job of rank r (1 first, claim order within the key) is in turn
  ``(pass + (r - 1) * TURN_UNITS / weight) / TURN_UNITS``; a ``fair=False`` key's jobs are all
  in the current turn (the lowest turn a weighted key the claim visits is in), whatever it
  took before.
- Jobs are taken by priority, then turn, then age (run_at, id), within each key's room.
- The pass of each key the claim took from advances by what it took.
- The walk starts next at the first visited key that still has work in the turn this claim
  started in (so a key of weight 3 keeps its place until its three jobs are taken); once
  every visited key is past that turn, after the last visited key (the keys beyond get their
  turn), or from the first key when the walk went round them all.

The claim is also cheaper a key (docs/design.md, "Plans that hold whatever the statistics
say"; 20,000 one-job keys drained in 3.3 s where they took 17): it counts the running jobs of a
key only when the key has a limit (a key without one is only locked, inline); it locks the
chosen rows by primary key whatever the statistics say (``state <> 'running'``, which no
partial index's predicate matches: a plan made without statistics walked a whole partial
index for 10 ids, 11 ms a claim); and when it serves every queue it reads the walk index's
next entries in one scan, which for keys of a job or two is the whole walk and every key's
candidates (no probe a key), else it steps over the keys' backlogs with a recursive loose
scan, a probe a key whose entry carries the key's limit, weight and order.

The walk is the statement inside ``skiplock_keyed_claim`` as the migrations made it
(``migrations/0022.sql``); nothing here runs it (``JOB_GET_AVAILABLE_KEYED`` calls the
function), and the plan tests that EXPLAIN it read it out of that file
(tests/backends/helpers.py, ``keyed_claim_walk``). The statements the backend runs are in
``queries/keys.sql`` and ``queries/claim.sql``.
"""

from __future__ import annotations

from ..._job import BlockedKey, KeyLoad
from ..job_rows import blocked_key, key_load
from ..params import JobBusiestKeysParams
from .connection import Connection
from .errors import wrapped as _wrapped


class Keys(Connection):
    """Concurrency keys: the busiest and the blocked."""

    async def job_busiest_keys(self, params: JobBusiestKeysParams) -> list[KeyLoad]:
        limit, queue, task = params.limit, params.queue, params.task
        with _wrapped("job_busiest_keys"):
            args = (self._now(), queue, task, limit)
            rows = await self.pool.fetch(self._sql.JOB_BUSIEST_KEYS, *args)
        return [key_load(tuple(r)) for r in rows]

    async def job_blocked_keys(self, limit: int) -> list[BlockedKey]:
        with _wrapped("job_blocked_keys"):
            rows = await self.pool.fetch(self._sql.JOB_BLOCKED_KEYS, limit)
        return [blocked_key(tuple(r)) for r in rows]
