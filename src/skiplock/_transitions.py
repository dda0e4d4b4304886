"""What an attempt's outcome writes to its row, decided once, in Python, for every dialect.

The worker decides how an attempt ended (``classify``: a Disposition and a delay); this says
what that means for the row: its next state, whether the attempt counts, when it may run
again, whether it is finished. The backends' batched completion statements write exactly
these columns, fenced by the lease token, so no dialect's SQL holds a rule of the lifecycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._job import Disposition, JobState


@dataclass(frozen=True, slots=True)
class Transition:
    """The columns one outcome writes (besides clearing the lease and appending its error)."""

    state: JobState
    attempt_delta: int
    """-1 gives the attempt back (a snooze, or a release at shutdown); 0 keeps it spent."""
    run_after_s: float | None
    """Run again this many seconds after the database's now(); None keeps ``run_at``."""
    finished: bool
    """A final state: ``finished_at`` becomes now(). Otherwise it is cleared."""


_RULES: dict[Disposition, tuple[JobState, int, bool]] = {
    Disposition.SUCCEED: (JobState.SUCCEEDED, 0, False),
    Disposition.RETRY: (JobState.PENDING, 0, True),
    Disposition.SNOOZE: (JobState.PENDING, -1, True),
    Disposition.RELEASE: (JobState.PENDING, -1, False),
    Disposition.PARK: (JobState.WAITING, -1, True),
    Disposition.CANCEL: (JobState.CANCELLED, 0, False),
    Disposition.DEAD: (JobState.DEAD, 0, False),
}
"""Disposition -> (next state, attempt change, runs again after the delay).

A release (jobs claimed ahead given back, or a shutdown's) keeps ``run_at``: the job was due
and keeps its place among the ready, as a reclaimed job does. Were it due "now", a give-back
would send it behind every job enqueued since, and a worker would run them out of order."""


def transition(disposition: Disposition, delay_s: float = 0.0) -> Transition:
    """The row change for an attempt that ended as ``disposition``."""
    state, attempt_delta, again = _RULES[disposition]
    return Transition(
        state=state,
        attempt_delta=attempt_delta,
        run_after_s=delay_s if again else None,
        finished=state in JobState.final(),
    )
