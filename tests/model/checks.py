"""Which rules the semantics test holds skiplock to that a defect broke: one flag per defect
the state machine reaches, each True (checked). The first eleven are issue 42's (each gates
the rule that reaches it and the pinned sequence in ``sequences.py`` that shows it); the last
three were found by this test (``test_findings.py`` has each as a user meets it).

A flag set to False takes the rule that reaches its defect out of the machine (the rule then
avoids the trigger: distinct step names, one ``wait_for`` per job, keys named per task, a
block that does not raise...) or, where the defect is in what the model expects rather than
in a rule's input, makes the model expect the defect. Set one to False only to see what else
the machine finds while that defect is being fixed, never to make the test pass; name it in
``SKIPLOCK_MODEL_SKIP`` (comma-separated) to do so without editing this file.
"""

from __future__ import annotations

import os

_SKIPPED = set(os.environ.get("SKIPLOCK_MODEL_SKIP", "").split(","))

# -- issue 42 ------------------------------------------------------------------------------

CHECK_RAISING_BATCH_BLOCK = "CHECK_RAISING_BATCH_BLOCK" not in _SKIPPED
"""Item 1: a batch block that raises aborts its batch: neither callback runs (BatchAborted),
its members that never started are cancelled (before the fix: the block's end closed the
batch, and ``on_success`` ran over the members enqueued before the raise)."""

CHECK_STEP_NAMES_BY_CALL_ORDER = "CHECK_STEP_NAMES_BY_CALL_ORDER" not in _SKIPPED
"""Item 2: ``[await job.step("charge", fn, i) for i in items]`` runs ``fn`` once per call,
steps known by name and call order (before: the first result for every call)."""

CHECK_SIGNALS_ONE_PER_WAIT = "CHECK_SIGNALS_ONE_PER_WAIT" not in _SKIPPED
"""Item 2: a job's signals are a mailbox per name; the n-th ``wait_for("go")`` takes the n-th
(before: a second wait returned the first payload, and a second signal was a DUPLICATE)."""

CHECK_KEY_WEIGHTS_IN_STEADY_STATE = "CHECK_KEY_WEIGHTS_IN_STEADY_STATE" not in _SKIPPED
"""Item 3: at ``concurrency=1`` a ``key_weight=3`` key starts 6 of the first 8 jobs against a
weight-1 key (before: 4, one a turn like a weight-1 key)."""

CHECK_UNIQUE_KEYS_PER_TASK = "CHECK_UNIQUE_KEYS_PER_TASK" not in _SKIPPED
"""Item 4: a unique key is its task's own unless ``unique_scope="shared"`` (before: one key
shared by every task: ``keep`` handed back the other task's job, ``replace`` rewrote it)."""

CHECK_ORDERED_KEY_ACROSS_WAIT = "CHECK_ORDERED_KEY_ACROSS_WAIT" not in _SKIPPED
"""Item 5: a job of an ordering key parked on ``wait_for`` still holds its key (before: the
key's next job ran and finished first)."""

CHECK_CHORD_OVER_PAYLOAD = "CHECK_CHORD_OVER_PAYLOAD" not in _SKIPPED
"""Item 6: a chord whose results exceed ``max_payload_bytes`` fails its body alone, dead with
``PayloadTooLarge`` (before: the body was released with the oversized argument and ran)."""

CHECK_RETRIED_LINK_TAKES_ITS_RESULT = "CHECK_RETRIED_LINK_TAKES_ITS_RESULT" not in _SKIPPED
"""Item 10: a cancelled chain link or chord body requeued waits for its parents' results, or
is refused (``ParentResultGone``) when one has none (before: it ran at once without them: a
TypeError, dead)."""

CHECK_PRUNED_WAIT_PARENT = "CHECK_PRUNED_WAIT_PARENT" not in _SKIPPED
"""Item 10: a ``wait`` child of a failed parent that was pruned is cancelled (ParentFailed),
by the prune or the next sweep (before: it waited for ever)."""

CHECK_WAIT_TIMEOUT_UNDER_DRAIN = "CHECK_WAIT_TIMEOUT_UNDER_DRAIN" not in _SKIPPED
"""Item 10: a ``wait_for`` whose timeout passed runs again under ``app.drain()`` (before: only
a worker's sweep, every 5 s, timed it out; a drain never did)."""

CHECK_BATCH_BY_ID_STAYS_OPEN = "CHECK_BATCH_BY_ID_STAYS_OPEN" not in _SKIPPED
"""Item 10: ``async with app.batch(id=B)`` adds to an open batch and leaves it open (before:
the block's end closed it)."""

# -- found by this test --------------------------------------------------------------------

CHECK_KEY_TURNS_AFTER_IDLE = "CHECK_KEY_TURNS_AFTER_IDLE" not in _SKIPPED
"""With issue 42's key turns: two keys (weights 3 and 1) back with work after both ran out
must take turns as new keys do, AAAB AAAB ("a key cannot save up turns by going idle")
(before migration 25: the weight-3 key started its first 6 jobs in a row, AAAAAAB..., on
both databases: its turn row, and the other's, outlived their last jobs)."""

CHECK_PARKED_UNIQUE_JOB_RESUMES = "CHECK_PARKED_UNIQUE_JOB_RESUMES" not in _SKIPPED
"""A job with a ``unique_key`` parked on ``wait_for`` keeps its key, as a running one does
(an enqueue of the key meets it as the key's holder), so it always resumes (before the fix: it
gave its key up, another job took it, and the parked one could never resume: ``app.signal``
raised ``DuplicateJob``, and so did the wait timer that timed its wait out, which ended the
worker: the exception left the TaskGroup)."""

CHECK_BATCH_COUNTS_KEEP_PRUNED = "CHECK_BATCH_COUNTS_KEEP_PRUNED" not in _SKIPPED
"""``app.batch_info(id).counts`` counts a member pruned before its batch finished as ``gone``
(as ``BatchInfo`` documents), so a callback that reads it counts every member; the prune
deletes the membership instead, and the batch seems one member smaller."""
