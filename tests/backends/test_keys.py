"""Concurrency keys on both backends (issue 25): a key's limit holds in the claim itself, the
ordinary and keyed claims never take each other's jobs, and claims take from keys in turn
(priority first, then the key's turn, then age)."""

from __future__ import annotations

import sqlite3

import asyncpg
import pytest

import skiplock
from skiplock._backends import Backend
from skiplock._backends.claim_rules import KEYS_PER_CLAIM_MIN, TURN_UNITS
from skiplock._backends.params import (
    JobActionParams,
    JobInsertManyParams,
    QueueSetLimitsParams,
    QueueSetPausedParams,
    TaskPauseParams,
)
from skiplock._backends.postgres.storage import operations as postgres
from skiplock._backends.sqlite import keys as sqlite_keys
from skiplock._job import ClaimedJob, Completion, Disposition, JobState

from ..helpers import FakeClock, server_url
from .helpers import claim, new_job, read_raw


async def enqueue(backend: Backend, *specs: tuple[str | None, int | None, str]) -> list[int]:
    """One job per (key, limit, label): the label is the job's task name."""
    jobs = [new_job(label, concurrency_key=key, key_limit=lim) for key, lim, label in specs]
    return await backend.job_insert_many(JobInsertManyParams(jobs))


async def finish(backend: Backend, jobs: list[ClaimedJob]) -> None:
    completions = [Completion(j.id, j.lease_token, Disposition.SUCCEED) for j in jobs]
    assert len(await backend.job_set_state_if_running_many(completions)) == len(jobs)


def labels(jobs: list[ClaimedJob]) -> list[str]:
    return sorted(j.task for j in jobs)


async def test_a_key_runs_at_most_its_limit_and_a_finish_frees_its_slot(
    backend: Backend,
) -> None:
    await enqueue(backend, *[("a", 2, f"a{i}") for i in range(5)], ("b", 1, "b0"), ("b", 1, "b1"))
    first = await backend.job_get_available_keyed(claim(limit=10))
    assert labels(first) == ["a0", "a1", "b0"]
    assert await backend.job_get_available_keyed(claim(limit=10)) == []
    await finish(backend, [j for j in first if j.task == "a0"])
    assert labels(await backend.job_get_available_keyed(claim(limit=10))) == ["a2"]


async def test_the_ordinary_and_the_keyed_claims_never_take_each_others_jobs(
    backend: Backend,
) -> None:
    await enqueue(backend, ("k", None, "keyed"), (None, None, "plain"))
    assert labels(await backend.job_get_available(claim(limit=10))) == ["plain"]
    assert labels(await backend.job_get_available_keyed(claim(limit=10))) == ["keyed"]


async def test_a_reclaimed_lease_frees_its_slot(backend: Backend, clock: FakeClock) -> None:
    """A crashed worker's slot frees with its lease, and only then."""
    await enqueue(backend, ("k", 1, "first"), ("k", 1, "second"))
    (held,) = await backend.job_get_available_keyed(claim())
    assert held.task == "first"
    clock.advance(60)  # within the 65 s lease
    assert await backend.job_reclaim_expired() == []
    assert await backend.job_get_available_keyed(claim()) == []
    clock.advance(10)  # past it: the worker died
    assert await backend.job_reclaim_expired() == [held.id]
    assert len(await backend.job_get_available_keyed(claim(token="t2"))) == 1
    assert await backend.job_get_available_keyed(claim(token="t3")) == []


FAIRNESS = [
    pytest.param(
        [("k1", "a1"), ("k1", "a2"), ("k1", "a3"), ("k2", "b1"), ("k2", "b2"), ("k3", "c1")],
        4,
        ["a1", "a2", "b1", "c1"],
        id="each key's first job, then each key's second, keys in turn",
    ),
    pytest.param(
        [("k1", "a1"), ("k1", "a2"), ("k2", "b1"), ("k3", "c1:5")],
        2,
        ["a1", "c1:5"],
        id="priority first, whichever key it is",
    ),
    pytest.param(
        [("hot", f"h{i}") for i in range(20)] + [(f"cold{i}", f"c{i}") for i in range(3)],
        4,
        ["c0", "c1", "c2", "h0"],
        id="a hot key takes one turn like a cold one",
    ),
    pytest.param(
        [("k1", "a1:1"), ("k1", "a2:1"), ("k2", "b1:1"), ("k2", "b2")],
        3,
        ["a1:1", "a2:1", "b1:1"],
        id="within a priority, turns; a lower priority waits for the higher ones",
    ),
    pytest.param(
        [("k1*3", f"a{i}") for i in range(1, 6)] + [("k2", "b1"), ("k2", "b2"), ("k3", "c1")],
        6,
        ["a1", "a2", "a3", "a4", "b1", "c1"],
        id="a key of weight 3 takes three jobs a turn to another's one",
    ),
    pytest.param(
        [("k1", "a1"), ("k1", "a2"), ("k2*2", "b1"), ("k2*2", "b2"), ("k2*2", "b3")],
        3,
        ["a1", "b1", "b2"],
        id="the weight is the key's, its first ready job's",
    ),
    pytest.param(
        [("k3*0", f"c{i}") for i in range(1, 4)] + [("k1", "a1"), ("k1", "a2"), ("k2", "b1")],
        5,
        ["a1", "b1", "c1", "c2", "c3"],
        id="fair=False: no turns, the key takes all it may in the first",
    ),
]


@pytest.mark.parametrize(("jobs", "limit", "taken"), FAIRNESS)
async def test_the_fairness_rule_priority_then_turn_then_age(
    backend: Backend, jobs: list[tuple[str, str]], limit: int, taken: list[str]
) -> None:
    """A label ``name:p`` has priority p (else 0), a key ``k*w`` weight w (``*0``: not fair);
    jobs are enqueued in the order listed."""
    rows = []
    for spec, label in jobs:
        _, _, priority = label.partition(":")
        key, _, weight = spec.partition("*")
        rows.append(
            new_job(
                label,
                concurrency_key=key,
                priority=int(priority or 0),
                key_weight=int(weight) if weight else None,
            )
        )
    await backend.job_insert_many(JobInsertManyParams(rows))
    assert labels(await backend.job_get_available_keyed(claim(limit=limit))) == taken


async def test_claims_take_keys_in_turn_across_claims_and_wrap_round(backend: Backend) -> None:
    """Successive claims go round the keys: each starts after the last key the one before
    took from, and goes back to the first key after the last."""
    await enqueue(backend, *[(f"k{n}", None, f"k{n}-{i}") for n in range(5) for i in range(3)])
    rounds = [labels(await backend.job_get_available_keyed(claim(limit=2))) for _ in range(5)]
    assert rounds == [
        ["k0-0", "k1-0"],
        ["k2-0", "k3-0"],
        ["k0-1", "k4-0"],  # k4, then round again to k0
        ["k1-1", "k2-1"],
        ["k3-1", "k4-1"],
    ]


async def test_claims_over_more_keys_than_a_walk_visits_take_each_once_in_turn(
    backend: Backend,
) -> None:
    """More keys than a claim visits, claims of 8: one-job keys (the walk reads their entries
    in one scan of the walk index, then goes on where it stopped) are taken in key order,
    each once; keys of three jobs (the walk steps over each key's backlog) are taken a job
    each in turn, round and round."""
    await enqueue(backend, *[(f"k{n:02}", None, f"k{n:02}") for n in range(45)])
    taken: list[str] = []
    while jobs := await backend.job_get_available_keyed(claim(limit=8, token=f"t{len(taken)}")):
        taken += [j.task for j in jobs]
        await finish(backend, jobs)
    assert taken == [f"k{n:02}" for n in range(45)]
    await enqueue(
        backend, *[(f"k{n:02}", None, f"k{n:02}-{i}") for n in range(45) for i in range(3)]
    )
    taken = []
    while jobs := await backend.job_get_available_keyed(claim(limit=8, token=f"u{len(taken)}")):
        taken += [j.task for j in jobs]
        await finish(backend, jobs)
    assert sorted(taken) == sorted(f"k{n:02}-{i}" for n in range(45) for i in range(3))
    rounds = [taken[45 * i : 45 * (i + 1)] for i in range(3)]
    assert [
        sorted(r) == sorted(f"k{n:02}-{i}" for n in range(45)) for i, r in enumerate(rounds)
    ] == [True] * 3


async def test_a_capped_key_leaves_its_turn_to_the_keys_after_it(backend: Backend) -> None:
    """No ready job waits forever behind keys at their limit: a claim that took nothing
    still moves the walk past the keys it visited, so the next one goes on from there."""
    # 40 keys at their limit of 1 (one running each: taken by a claim of one queue, which
    # keeps a walk of its own), far more than one walk of a claim of 1 visits
    await enqueue(backend, *[(f"a{n:02}", 1, f"a{n:02}") for n in range(40)])
    running = await backend.job_get_available_keyed(claim(limit=40, queues=("default",)))
    assert len(running) == 40
    await enqueue(backend, *[(f"a{n:02}", 1, f"a{n:02}-next") for n in range(40)])
    await enqueue(backend, ("z", 1, "z"))
    claims = [await backend.job_get_available_keyed(claim(limit=1))]
    assert claims[0] == []  # its walk met capped keys only
    while not claims[-1] and len(claims) <= 40 // KEYS_PER_CLAIM_MIN + 1:
        claims.append(await backend.job_get_available_keyed(claim(limit=1)))
    assert labels(claims[-1]) == ["z"]
    assert len(claims) == 40 // KEYS_PER_CLAIM_MIN + 1  # each claim walked on past 8 keys


async def test_a_key_spans_queues_and_a_claim_reads_only_its_queues(backend: Backend) -> None:
    jobs = [new_job("a", queue="a", concurrency_key="k", key_limit=1)]
    jobs += [new_job("b", queue="b", concurrency_key="k", key_limit=1)]
    jobs += [new_job("other", queue="b", concurrency_key="j")]
    await backend.job_insert_many(JobInsertManyParams(jobs))
    assert labels(await backend.job_get_available_keyed(claim(queues=("a",)))) == ["a"]
    # the key's one slot is taken, whichever queue asks
    assert labels(await backend.job_get_available_keyed(claim(queues=("b",)))) == ["other"]


async def test_paused_queues_and_tasks_and_limited_queues_are_left_to_their_rules(
    backend: Backend,
) -> None:
    await backend.job_insert_many(
        JobInsertManyParams(
            [
                new_job("paused-q", queue="p", concurrency_key="k"),
                new_job("paused-task", concurrency_key="k"),
                *[
                    new_job(f"limited{i}", queue="l", concurrency_key="m", key_limit=2)
                    for i in range(4)
                ],
            ]
        )
    )
    await backend.queue_set_paused(QueueSetPausedParams("p", True))
    await backend.task_pause(TaskPauseParams("paused-task", "test"))
    await backend.queue_set_limits(QueueSetLimitsParams("l", max_running=3))
    assert await backend.job_get_available_keyed(claim(limit=10)) == []
    # the limited queue's own claim keeps both its max_running (3) and the key's limit (2)
    limited = await backend.job_get_available_limited(claim(limit=10, queues=("l",)))
    assert labels(limited) == ["limited0", "limited1"]
    assert await backend.job_get_available_limited(claim(limit=10, queues=("l",))) == []


async def test_ready_exists_sees_a_keyed_job_only_while_its_key_has_room(
    backend: Backend,
) -> None:
    await enqueue(backend, ("k", 1, "one"), ("k", 1, "two"))
    assert await backend.job_ready_exists(None)
    assert len(await backend.job_get_available_keyed(claim())) == 1
    assert not await backend.job_ready_exists(None)


async def test_a_person_cancelling_a_running_job_frees_nothing_early_and_retry_requeues(
    backend: Backend,
) -> None:
    """A retried dead keyed job is claimed again through its key (it keeps key and limit)."""
    (job_id,) = await enqueue(backend, ("k", 1, "once"))
    (held,) = await backend.job_get_available_keyed(claim())
    completion = Completion(held.id, held.lease_token, Disposition.DEAD)
    await backend.job_set_state_if_running_many([completion])
    assert (await backend.job_get(job_id)).state is JobState.DEAD
    assert await backend.job_retry(JobActionParams(job_id, who="test"))
    assert await backend.job_get_available(claim()) == []
    (again,) = await backend.job_get_available_keyed(claim(token="t2"))
    assert again.id == job_id


# -- ordered keys (ordering_key=) ---------------------------------------------------------


async def ordered(backend: Backend, key: str, *labels: str, on_dead: str = "block") -> list[int]:
    jobs = [new_job(label, concurrency_key=key, key_limit=1, key_order=on_dead) for label in labels]
    return await backend.job_insert_many(JobInsertManyParams(jobs))


async def test_an_ordered_key_runs_its_jobs_one_at_a_time_in_enqueue_order(
    backend: Backend,
) -> None:
    """Enqueue order, not priority: a later job of higher priority still waits its turn; other
    keys run beside it."""
    await ordered(backend, "o", "first", "second")
    await backend.job_insert_many(
        JobInsertManyParams(
            [new_job("urgent", concurrency_key="o", key_limit=1, key_order="block", priority=9)]
        )
    )
    await ordered(backend, "p", "p1")
    seen = []
    while jobs := await backend.job_get_available_keyed(claim(limit=10)):
        assert len([j for j in jobs if j.task != "p1"]) <= 1
        seen += [j.task for j in jobs]
        await finish(backend, jobs)
    assert [t for t in seen if t != "p1"] == ["first", "second", "urgent"]
    assert "p1" in seen[:2]  # in the first claim, beside "first"


async def test_a_retrying_job_holds_its_key_and_a_reclaimed_one_stays_first(
    backend: Backend, clock: FakeClock
) -> None:
    await ordered(backend, "o", "first", "second")
    (held,) = await backend.job_get_available_keyed(claim())
    retry = Completion(held.id, held.lease_token, Disposition.RETRY, delay_s=30.0)
    await backend.job_set_state_if_running_many([retry])
    assert await backend.job_get_available_keyed(claim(token="t2")) == []  # backing off
    assert not await backend.job_ready_exists(None)
    clock.advance(31)
    (again,) = await backend.job_get_available_keyed(claim(token="t3"))
    assert again.task == "first"
    clock.advance(120)  # its worker dies: the lease expires and the job is reclaimed
    assert await backend.job_reclaim_expired() == [again.id]
    (third,) = await backend.job_get_available_keyed(claim(token="t4"))
    assert (third.task, third.attempt) == ("first", 3)


@pytest.mark.parametrize("on_dead", ["block", "skip"])
async def test_a_dead_ordered_job_blocks_its_key_until_a_person_acts_or_is_skipped(
    backend: Backend, on_dead: str
) -> None:
    first, _ = await ordered(backend, "o", "first", "second", on_dead=on_dead)
    (held,) = await backend.job_get_available_keyed(claim())
    await backend.job_set_state_if_running_many(
        [Completion(held.id, held.lease_token, Disposition.DEAD)]
    )
    after = await backend.job_get_available_keyed(claim(token="t2"))
    if on_dead == "skip":
        assert labels(after) == ["second"]
        return
    assert after == [] and not await backend.job_ready_exists(None)
    assert await backend.job_retry(JobActionParams(first, who="test"))  # a person acts
    (retried,) = await backend.job_get_available_keyed(claim(token="t3"))
    assert retried.id == first


# -- turns kept in the database ------------------------------------------------------------

TURNS = "SELECT concurrency_key, pass FROM skiplock_key_turns ORDER BY concurrency_key"


async def test_a_claim_advances_the_pass_of_each_key_it_takes_from(
    clocked_app: skiplock.App, backend: Backend
) -> None:
    """A key's pass moves by a whole turn a job at weight 1, a third of one at weight 3;
    a fair=False key has none (its jobs are always in the current turn)."""
    await backend.job_insert_many(
        JobInsertManyParams(
            [
                new_job("a", concurrency_key="a"),
                new_job("b", concurrency_key="b", key_weight=3),
                new_job("c", concurrency_key="c", key_weight=0),
            ]
        )
    )
    assert labels(await backend.job_get_available_keyed(claim(limit=10))) == ["a", "b", "c"]
    assert await read_raw(clocked_app, TURNS) == [("a", TURN_UNITS), ("b", TURN_UNITS // 3)]


async def test_a_keys_turn_row_goes_with_its_last_live_job(
    clocked_app: skiplock.App, backend: Backend
) -> None:
    """A key's turn row stays while it has a pending or running job and goes with its last
    one (migration 25): a key back with work later starts as a new key does, whether or not
    the upkeep pruned it meanwhile. Finished, failed for good, or cancelled while pending."""
    await enqueue(backend, ("done", None, "d1"), ("dead", None, "x1"))
    await enqueue(backend, ("kept", None, "k1"), ("kept", None, "k2"), ("gone", None, "c1"))
    jobs = await backend.job_get_available_keyed(claim(limit=4))
    assert labels(jobs) == ["c1", "d1", "k1", "x1"]
    assert await read_raw(clocked_app, KEYS) == [("dead",), ("done",), ("gone",), ("kept",)]
    done = [j for j in jobs if j.task in ("d1", "k1")]
    await finish(backend, done)
    dead = [Completion(j.id, j.lease_token, Disposition.DEAD) for j in jobs if j.task == "x1"]
    assert len(await backend.job_set_state_if_running_many(dead)) == 1
    assert await read_raw(clocked_app, KEYS) == [("gone",), ("kept",)]  # k2 is pending
    (gone,) = [j for j in jobs if j.task == "c1"]
    await finish(backend, [gone])
    assert await read_raw(clocked_app, KEYS) == [("kept",)]
    (k2,) = [job_id for (job_id,) in await read_raw(clocked_app, PENDING)]
    assert await backend.job_cancel(JobActionParams(k2, who="test")) == JobState.CANCELLED
    assert await read_raw(clocked_app, KEYS) == []


PENDING = "SELECT id FROM skiplock_jobs WHERE state = 'pending'"


KEYS = "SELECT concurrency_key FROM skiplock_key_turns ORDER BY concurrency_key"


async def _put_turns(app: skiplock.App, *keys: str) -> None:
    """Turn rows written around skiplock, as a claim holding them leaves them to the upkeep
    (the trigger that deletes them skips a row it cannot lock at once)."""
    values = ", ".join(f"('{k}', 0, 0)" for k in keys)
    if app.url.startswith("sqlite"):
        conn = sqlite3.connect(app.url.removeprefix("sqlite:///"))
        with conn:
            conn.execute(f"INSERT INTO skiplock_key_turns VALUES {values.replace(', 0)', ')')}")
        conn.close()
        return
    pg = await asyncpg.connect(server_url(app.url))
    try:
        schema = app.url.rsplit("schema=", 1)[1]
        await pg.execute(f'INSERT INTO "{schema}".skiplock_key_turns VALUES {values}')
    finally:
        await pg.close()


async def test_the_upkeep_prunes_the_turns_of_keys_with_nothing_left(
    clocked_app: skiplock.App, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn row the trigger left (a claim held it) goes once its key has no live job, a
    slice of the keys a call (here one key), going round them."""
    await enqueue(backend, ("kept", None, "k1"), ("kept", None, "k2"))
    jobs = await backend.job_get_available_keyed(claim(limit=1))
    await finish(backend, jobs)
    await _put_turns(clocked_app, "gone1", "gone2")
    assert await read_raw(clocked_app, KEYS) == [("gone1",), ("gone2",), ("kept",)]
    monkeypatch.setattr(postgres, "KEY_TURNS_SLICE", 1)
    monkeypatch.setattr(sqlite_keys, "KEY_TURNS_SLICE", 1)
    left = []
    for _ in range(4):
        await backend.storage_upkeep()
        left.append([key for (key,) in await read_raw(clocked_app, KEYS)])
    assert left == [["gone2", "kept"], ["kept"], ["kept"], ["kept"]]
