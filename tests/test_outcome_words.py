"""One outcome vocabulary (``_observe/outcomes.py``): every surface reads the one table, and
the words users see are the ones documented (docs/metrics.md)."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from skiplock import StatsGroup
from skiplock._attempt import Decision
from skiplock._job import ClaimedJob, Disposition
from skiplock._observe import events
from skiplock._observe.meter import Meter
from skiplock._observe.outcomes import FAILED, FINISHED, OUTCOMES

DOC = (Path(__file__).parents[1] / "docs" / "metrics.md").read_text()


def test_every_disposition_has_its_words() -> None:
    assert set(OUTCOMES) == set(Disposition)
    assert FINISHED == ("completed", "cancelled", "dead")
    assert {Disposition.RETRY, Disposition.DEAD} == FAILED


def test_the_final_words_are_the_stats_fields_and_the_documented_labels() -> None:
    fields = {f.name for f in dataclasses.fields(StatsGroup)}
    assert set(FINISHED) <= fields
    labels = ", ".join(f"`{w}`" for w in FINISHED)
    assert f"jobs finished in the window: {labels}" in DOC


def test_the_meter_counts_every_disposition_under_its_documented_label() -> None:
    meter = Meter()
    meter.start("q", "t")
    assert set(meter.series[("q", "t")].outcomes) == set(Disposition)
    labels = ", ".join(f"`{o.label}`" for o in OUTCOMES.values())
    assert f"attempts this worker finished: {labels}" in DOC


def _job() -> ClaimedJob:
    now = datetime.now(UTC)
    return ClaimedJob(
        id=7, task="t", queue="q", args_json="[]", kwargs_json="{}", priority=0, attempt=1,
        max_attempts=3, timeout=None, lease_token="x", created_at=now, lease_expires_at=now,
    )  # fmt: skip


@pytest.mark.parametrize("disposition", list(Disposition))
def test_the_ended_event_says_the_tables_word_at_its_level(
    disposition: Disposition, caplog: pytest.LogCaptureFixture
) -> None:
    outcome = OUTCOMES[disposition]
    with caplog.at_level(logging.DEBUG, logger="skiplock.jobs"):
        events.ended(_job(), Decision(disposition, 1.0), 0.5, "w")
    [record] = caplog.records
    assert record.event == outcome.event  # type: ignore[attr-defined]
    assert record.levelno == outcome.level
    assert f"job 7 {outcome.event} after" in record.getMessage()
    assert f"`{outcome.event}`" in DOC
