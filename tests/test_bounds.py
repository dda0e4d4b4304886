"""Every value a user passes is checked at the edge against ``_limits``, identically on both
backends; and one outcome the database refuses never holds back the others (issue 9)."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta

import pytest

import skiplock
from skiplock import Breaker, ConfigurationError, JobState, Retry, RetryPolicy, Snooze
from skiplock._backends.params import ClaimParams
from skiplock._job import Completion, Disposition
from skiplock._limits import MAX_SECONDS
from skiplock._worker.completer import Completer
from skiplock._worker.worker import Worker

INF, NAN = math.inf, math.nan
BAD_SECONDS = [INF, -INF, NAN, MAX_SECONDS * 2, -1.0, "5", None]


@pytest.mark.parametrize("value", BAD_SECONDS)
def test_retry_and_snooze_refuse_unbounded_delays(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"Retry\.in_s="):
        Retry(in_s=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"Snooze\.in_s="):
        Snooze(value)  # type: ignore[arg-type]


def test_retry_and_snooze_take_any_bounded_delay() -> None:
    assert Retry(in_s=MAX_SECONDS).in_s == MAX_SECONDS
    assert Snooze(0).in_s == 0.0


@pytest.mark.parametrize("value", BAD_SECONDS)
def test_retry_policy_and_breaker_refuse_unbounded_durations(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"RetryPolicy\.base_s="):
        RetryPolicy(base_s=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"RetryPolicy\.cap_s="):
        RetryPolicy(base_s=0, cap_s=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"Breaker\.window_s="):
        Breaker(window_s=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"Breaker\.cooldown_s="):
        Breaker(cooldown_s=value)  # type: ignore[arg-type]


TASK_OPTIONS: list[tuple[str, object]] = [
    ("timeout", INF),
    ("timeout", NAN),
    ("timeout", 0),
    ("timeout", MAX_SECONDS + 1),
    ("visibility_timeout", INF),
    ("visibility_timeout", 0.1),
    ("priority", 2**31),
    ("priority", -(2**31) - 1),
    ("priority", 1.5),
    ("max_attempts", 10**10),
    ("max_attempts", 0),
    ("queue", "a\x00b"),
    ("queue", "q" * 1001),
    ("queue", "é" * 501),  # 1,002 bytes: the bound is in bytes
]
USING_OPTIONS: list[tuple[str, object]] = [
    ("timeout", INF),
    ("priority", 2**31),
    ("max_attempts", 10**10),
    ("queue", "nul\x00"),
    ("unique_key", "k\x00"),
    ("correlation_id", "c\x00"),
    ("run_after", timedelta.max),
    ("run_after", timedelta(days=365 * 11)),
    ("run_after", datetime.max.replace(tzinfo=UTC)),
    ("run_after", datetime.min.replace(tzinfo=UTC)),
    ("run_after", datetime(2020, 1, 1)),
]


LABELS = {"queue", "unique_key", "correlation_id", "concurrency_key", "ordering_key"}
"""Options whose errors name the task first (a key is set per task, often per call)."""


def _start(option: str) -> str:
    return f"^task 't': {option}=" if option in LABELS else f"^{option}="


@pytest.mark.parametrize(("option", "value"), TASK_OPTIONS)
def test_task_options_are_bounded(option: str, value: object) -> None:
    app = skiplock.App("sqlite:///unused.db")
    with pytest.raises(ConfigurationError, match=_start(option)):
        app.task(name="t", **{option: value})(lambda: None)  # type: ignore[call-overload]


@pytest.mark.parametrize(("option", "value"), USING_OPTIONS)
def test_using_options_are_bounded(option: str, value: object) -> None:
    app = skiplock.App("sqlite:///unused.db")
    task = app.task(name="t")(lambda: None)
    with pytest.raises(ConfigurationError, match=_start(option)):
        task.using(**{option: value})  # type: ignore[arg-type]


def test_the_extremes_inside_the_bounds_are_accepted() -> None:
    app = skiplock.App("sqlite:///unused.db")
    task = app.task(name="t", timeout=MAX_SECONDS, visibility_timeout=MAX_SECONDS)(lambda: None)
    task.using(priority=2**31 - 1, max_attempts=1_000_000, run_after=timedelta(days=3650))
    task.using(priority=-(2**31), run_after=timedelta(seconds=-5))


@pytest.mark.parametrize(
    ("option", "value"),
    [("max_depth", 2**31), ("max_running", -1), ("rate_per_s", INF), ("rate_per_s", NAN)],
)
async def test_queue_limits_are_bounded(app: skiplock.App, option: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"^{option}="):
        await app.set_queue_limits("default", **{option: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [INF, NAN, 0, -1.0, MAX_SECONDS * 2])
async def test_pause_for_is_bounded(app: skiplock.App, value: float) -> None:
    @app.task(name="t")
    async def t() -> None:
        pass

    with pytest.raises(ConfigurationError, match=r"^for_s="):
        await app.pause_task("t", for_s=value)


async def test_a_call_that_does_not_fit_the_signature_is_refused_before_writing(
    app: skiplock.App,
) -> None:
    @app.task(name="one")
    async def one(x: int) -> None:
        pass

    with pytest.raises(TypeError, match="arguments do not fit"):
        await one.aenqueue()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="arguments do not fit"):
        await one.aenqueue(1, y=2)  # type: ignore[call-arg]
    assert await app.list_jobs() == []


# -- the completer: one refused outcome, the rest recorded ------------------------------------


def _claim() -> ClaimParams:
    return ClaimParams(None, 10, "w1", "tok", default_lease=60.0, lease_margin=5.0)


async def _complete(app: skiplock.App, outcomes: list[Completion]) -> None:
    completer = Completer(await app.backend(), max_batch=100)
    for c in outcomes:
        completer.put(c)
    completer.close()
    await asyncio.wait_for(completer.run(), 30)


@pytest.mark.parametrize(
    "poison",
    [
        {"error": {"unencodable": object()}},  # the driver cannot even send it
        {"disposition": Disposition.RETRY, "delay_s": INF},  # an interval out of range
        {"disposition": Disposition.SNOOZE, "delay_s": NAN},
    ],
    ids=["unencodable-error", "infinite-delay", "nan-delay"],
)
async def test_one_unwritable_outcome_is_dead_lettered_and_the_rest_recorded(
    app: skiplock.App, poison: dict[str, object]
) -> None:
    @app.task(name="t")
    async def t(n: int) -> None:
        pass

    await app.enqueue_many([t.prepare(n) for n in range(5)])
    claimed = await (await app.backend()).job_get_available(_claim())
    assert len(claimed) == 5
    outcomes = [Completion(j.id, j.lease_token, Disposition.SUCCEED) for j in claimed]
    bad = claimed[2]
    fields: dict[str, object] = {"disposition": Disposition.SUCCEED, **poison}
    outcomes[2] = Completion(bad.id, bad.lease_token, **fields)  # type: ignore[arg-type]
    await _complete(app, outcomes)
    for job in claimed:
        record = await app.get_job(job.id)
        if job.id == bad.id:
            assert record.state is JobState.DEAD
            assert "could not be recorded" in record.errors[-1]["message"]
        else:
            assert record.state is JobState.SUCCEEDED


async def test_a_retry_with_an_infinite_delay_fails_the_job_not_the_batch(
    app: skiplock.App,
) -> None:
    @app.task(name="forever", max_attempts=1)
    async def forever() -> None:
        raise Retry(in_s=INF)

    @app.task(name="fine")
    async def fine() -> None:
        pass

    bad = await forever.aenqueue()
    good = [await fine.aenqueue() for _ in range(3)]
    await asyncio.wait_for(Worker(app, poll_interval_s=0.05).run(burst=True), 60)
    record = await bad.fetch()
    assert record.state is JobState.DEAD and "Retry.in_s=inf" in record.errors[-1]["message"]
    for handle in good:
        assert (await handle.fetch()).state is JobState.SUCCEEDED
