"""Which corrected rules the semantics test holds skiplock to: one flag per defect of issue 42
that the state machine can reach, each True (checked).

A flag set to False takes the rule that reaches its defect out of the machine (the rule then
avoids the trigger: distinct step names, one ``wait_for`` per name, keys named per task, a
block that does not raise...) and, where the defect is in what the model expects rather than
in a rule's input, makes the model expect today's behaviour instead. Set one to False only to
see what else the machine finds while that defect is being fixed elsewhere, never to make the
test pass: each flag's docstring says how the defect shows, and the report of the session that
added them lists the flags that fail on main.
"""

from __future__ import annotations

import os

_SKIPPED = set(os.environ.get("SKIPLOCK_MODEL_SKIP", "").split(","))
"""Flags named in ``SKIPLOCK_MODEL_SKIP`` (comma-separated) start False: for a person who
wants the rest of the machine while one defect is open, never for CI."""

CHECK_RAISING_BATCH_BLOCK = "CHECK_RAISING_BATCH_BLOCK" not in _SKIPPED
"""Issue 42, 1: a batch block that raises must not call back (today: the block's end closes
the batch and ``on_success`` runs over the members enqueued before the raise)."""

CHECK_STEP_NAMES_BY_CALL_ORDER = "CHECK_STEP_NAMES_BY_CALL_ORDER" not in _SKIPPED
"""Issue 42, 2: ``[await job.step("charge", fn, i) for i in items]`` runs ``fn`` once per call
(steps keyed by call order; today: the first result for every call, ``fn`` ran once)."""

CHECK_SIGNALS_ONE_PER_WAIT = "CHECK_SIGNALS_ONE_PER_WAIT" not in _SKIPPED
"""Issue 42, 2: a second ``wait_for("go")`` in one run takes the second signal (today: the
first payload again, so a ``while`` loop over a signal spins for ever)."""

CHECK_KEY_WEIGHTS_IN_STEADY_STATE = "CHECK_KEY_WEIGHTS_IN_STEADY_STATE" not in _SKIPPED
"""Issue 42, 3: at ``concurrency=1`` a ``key_weight=3`` key starts 6 of the first 8 jobs
against a weight-1 key (today: 4, one a turn like a weight-1 key)."""

CHECK_UNIQUE_KEYS_PER_TASK = "CHECK_UNIQUE_KEYS_PER_TASK" not in _SKIPPED
"""Issue 42, 4: two tasks enqueueing the same unique key string hold two keys (today: one key
shared by every task: ``replace`` rewrites the other task's job, ``keep`` hands back its
handle)."""

CHECK_ORDERED_KEY_ACROSS_WAIT = "CHECK_ORDERED_KEY_ACROSS_WAIT" not in _SKIPPED
"""Issue 42, 5: a job of an ordering key parked on ``wait_for`` still holds its key (today:
the key's next job runs and finishes first)."""

CHECK_CHORD_OVER_PAYLOAD = "CHECK_CHORD_OVER_PAYLOAD" not in _SKIPPED
"""Issue 42, 6: a chord whose results exceed ``max_payload_bytes`` fails its body alone, dead
with ``PayloadTooLarge`` (today: the body is released with the oversized argument and runs)."""

CHECK_RETRIED_LINK_TAKES_ITS_RESULT = "CHECK_RETRIED_LINK_TAKES_ITS_RESULT" not in _SKIPPED
"""Issue 42, 10: retrying a cancelled chain link (or chord body) never runs it without its
parent's result (today: it runs at once without it: a TypeError, dead)."""

CHECK_PRUNED_WAIT_PARENT = "CHECK_PRUNED_WAIT_PARENT" not in _SKIPPED
"""Issue 42, 10: a ``wait`` child of a dead parent that was pruned does not wait for ever (the
next sweep cancels it, or the parent is kept; today: it waits for ever)."""

CHECK_WAIT_TIMEOUT_UNDER_DRAIN = "CHECK_WAIT_TIMEOUT_UNDER_DRAIN" not in _SKIPPED
"""Issue 42, 10 (not in this slice's list, found by it): a ``wait_for`` whose timeout passed
runs again under ``app.drain()`` (today: only a worker's 5 s sweep times it out; a drain never
does)."""

CHECK_BATCH_BY_ID_STAYS_OPEN = "CHECK_BATCH_BY_ID_STAYS_OPEN" not in _SKIPPED
"""Issue 42, 10 (not in this slice's list): ``async with app.batch(id=B)`` adds to an open
batch without closing it (today: the block's end closes it)."""

CHECK_PARKED_UNIQUE_JOB_RESUMES = "CHECK_PARKED_UNIQUE_JOB_RESUMES" not in _SKIPPED
"""Found by this test (not in issue 42): a job with a ``unique_key`` parked on ``wait_for``
gives its key up (docs/concepts/lifecycle.md); once another job took the key, the parked one
can never resume: ``app.signal`` raises ``DuplicateJob``, and so does the sweep that times its
wait out, in every worker's rescuer, so it waits for ever."""

CHECK_BATCH_COUNTS_KEEP_PRUNED = "CHECK_BATCH_COUNTS_KEEP_PRUNED" not in _SKIPPED
"""Found by this test (not in issue 42): ``app.batch_info(id).counts`` counts a member pruned
before its batch finished as ``gone`` (as ``BatchInfo`` documents), so a callback that reads
it ("zipped 10 images") counts every member (today: the prune deletes its membership, and the
batch seems one member smaller)."""
