"""The shared flows, step by step: what each asks its dialect, and what it does with the
answers. (The conformance, rate and cron suites run them on both real databases.)"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from skiplock._backends import flows
from skiplock._backends.params import CronSlotClaimParams
from skiplock._job import SlotOutcome

from .helpers import claim, new_job

SLOT = datetime(2026, 1, 1, tzinfo=UTC)


def run(flow: Any, answers: dict[type, Any]) -> tuple[Any, list[Any]]:
    """Drive a flow with canned answers by step type; the result and the steps asked."""
    asked: list[Any] = []

    def answer(step: Any) -> Any:
        asked.append(step)
        return answers.get(type(step))

    return flows.drive(flow, answer), asked


def limits(**overrides: Any) -> flows.QueueLimits:
    values: dict[str, Any] = {
        "max_running": None,
        "rate_per_s": None,
        "paused": False,
        "recent_starts": [],
        "now": 100.0,
    }
    return flows.QueueLimits(**(values | overrides))


def test_a_paused_or_unknown_limited_queue_claims_nothing() -> None:
    for row in (None, limits(paused=True)):
        result, asked = run(flows.limited_claim(claim(queues=("q",))), {flows.LockQueue: row})
        assert result == [] and [type(s) for s in asked] == [flows.LockQueue]


def test_max_running_bounds_the_claim_and_a_rate_records_its_starts() -> None:
    answers = {
        flows.LockQueue: limits(max_running=5, rate_per_s=2.0, recent_starts=[99.5, 10.0]),
        flows.CountRunning: 4,
        flows.ClaimFromQueue: ["row"],
    }
    result, asked = run(flows.limited_claim(claim(limit=10, queues=("q",))), answers)
    (claimed,) = [s for s in asked if isinstance(s, flows.ClaimFromQueue)]
    assert claimed.params.limit == 1 and result == ["row"]
    assert asked[-1] == flows.SetStarts("q", [99.5, 100.0])  # 10.0 left the 1 s window


def test_a_limited_claim_names_exactly_one_queue() -> None:
    with pytest.raises(ValueError, match="exactly one queue"):
        run(flows.limited_claim(claim(queues=None)), {})


def test_a_cron_slot_taken_skipped_or_enqueued() -> None:
    params = CronSlotClaimParams("s", SLOT, new_job(), overlap=False)
    taken, _ = run(flows.cron_slot(params), {flows.InsertSlot: False})
    assert taken == (SlotOutcome.TAKEN, None)
    skipped, asked = run(
        flows.cron_slot(params), {flows.InsertSlot: True, flows.PreviousRunLive: True}
    )
    assert skipped == (SlotOutcome.SKIPPED, None)
    assert asked[-1] == flows.SetSlotOutcome("s", SLOT, None, True)
    answers = {flows.InsertSlot: True, flows.PreviousRunLive: False, flows.InsertJob: 7}
    enqueued, asked = run(flows.cron_slot(params), answers)
    assert enqueued == (SlotOutcome.ENQUEUED, 7)
    assert asked[-1] == flows.SetSlotOutcome("s", SLOT, 7, False)
