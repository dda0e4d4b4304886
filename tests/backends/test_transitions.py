"""The lifecycle's rules, as a table: what each outcome writes to its row."""

from __future__ import annotations

import pytest

from skiplock._job import Disposition, JobState
from skiplock._transitions import Transition, transition


@pytest.mark.parametrize(
    ("disposition", "expected"),
    [
        (Disposition.SUCCEED, Transition(JobState.SUCCEEDED, 0, None, True)),
        (Disposition.RETRY, Transition(JobState.PENDING, 0, 7.5, False)),
        (Disposition.SNOOZE, Transition(JobState.PENDING, -1, 7.5, False)),
        (Disposition.RELEASE, Transition(JobState.PENDING, -1, None, False)),
        (Disposition.CANCEL, Transition(JobState.CANCELLED, 0, None, True)),
        (Disposition.DEAD, Transition(JobState.DEAD, 0, None, True)),
    ],
)
def test_each_disposition_writes(disposition: Disposition, expected: Transition) -> None:
    assert transition(disposition, 7.5) == expected


def test_every_disposition_has_a_rule() -> None:
    for disposition in Disposition:
        assert transition(disposition).state in JobState
