"""Concurrency keys end to end (issue 25): the options checked at the edge, a worker keeping
every key within its limit, concurrent claimers on PostgreSQL, and a property test of the
claim on both backends over random keys, limits and crash points."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skiplock
from skiplock import ConfigurationError
from skiplock._backends.base import ClaimParams, JobInsertManyParams
from skiplock._job import ClaimedJob, Completion, Disposition, NewJob
from skiplock._limits import MAX_KEY_LIMIT, MAX_TEXT_CHARS
from skiplock._worker.worker import Worker

from .helpers import FakeClock

T = TypeVar("T")


def claim(limit: int, token: str) -> ClaimParams:
    return ClaimParams(None, limit, "w", token, default_lease=60.0, lease_margin=5.0)


# -- the options, checked where they are given ---------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key_limit": 2}, "key_limit=2: limits the jobs of one concurrency key"),
        ({"concurrency_key": "k", "key_limit": 0}, "key_limit=0: must be between 1 and"),
        ({"concurrency_key": "k", "key_limit": True}, "key_limit=True: must be an int"),
        ({"concurrency_key": "k", "key_limit": 2.0}, "key_limit=2.0: must be an int"),
        (
            {"concurrency_key": "k", "key_limit": MAX_KEY_LIMIT + 1},
            f"must be between 1 and {MAX_KEY_LIMIT}",
        ),
        ({"concurrency_key": ""}, "concurrency_key='': must be a non-empty string"),
        ({"concurrency_key": "a\x00b"}, "must not contain a NUL character"),
        ({"concurrency_key": "k" * (MAX_TEXT_CHARS + 1)}, f"at most {MAX_TEXT_CHARS}"),
        ({"concurrency_key": 7}, "concurrency_key=7: must be a non-empty string"),
    ],
)
def test_key_options_are_checked_where_they_are_given(
    sqlite_url: str, options: dict[str, Any], message: str
) -> None:
    app = skiplock.App(sqlite_url)

    def fn(n: int) -> None: ...

    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        app.task(name="decorated", **options)(fn)
    plain = app.task(name="plain")(fn)
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        plain.using(**options)


def test_a_key_function_is_called_with_the_arguments_and_its_mistakes_are_one_line(
    sqlite_url: str,
) -> None:
    app = skiplock.App(sqlite_url)

    def by_account(account: int, *, note: str = "") -> str:
        if account < 0:
            raise LookupError("no such account")
        return f"account:{account}" if account else ""

    @app.task(name="bill", concurrency_key=by_account, key_limit=3)
    def bill(account: int, *, note: str = "") -> None: ...

    job = bill.prepare(42, note="x")
    assert (job.concurrency_key, job.key_limit) == ("account:42", 3)
    with pytest.raises(
        ConfigurationError,
        match=r"task 'bill': its concurrency_key function "
        r"raised LookupError: no such account \(nothing was enqueued\)",
    ):
        bill.prepare(-1)
    with pytest.raises(ConfigurationError, match=r"task 'bill': concurrency_key='': must be"):
        bill.prepare(0)
    assert bill.using(concurrency_key="fixed").prepare(5).concurrency_key == "fixed"


# -- a worker keeps every key within its limit ---------------------------------------------


async def test_a_worker_runs_each_key_within_its_limit_and_every_job_once(db_url: str) -> None:
    app = skiplock.App(db_url)
    await app.migrate()
    running: collections.Counter[str] = collections.Counter()
    most: collections.Counter[str] = collections.Counter()
    ran: list[tuple[str, int]] = []

    @app.task(name="keyed", concurrency_key=lambda key, n: key, key_limit=2)
    async def keyed(key: str, n: int) -> None:
        running[key] += 1
        most[key] = max(most[key], running[key])
        ran.append((key, n))
        await asyncio.sleep(0.02)  # the job's own work: long enough for others to overlap
        running[key] -= 1

    @app.task(name="plain")
    async def plain(n: int) -> None:
        ran.append(("plain", n))

    try:
        jobs = [keyed.prepare(k, n) for k in ("a", "b", "c") for n in range(6)]
        await app.enqueue_many([*jobs, *(plain.prepare(n) for n in range(6))])
        worker = Worker(app, concurrency=8, poll_interval_s=0.05, scheduler=False)
        await asyncio.wait_for(worker.run(burst=True), 60)
    finally:
        await app.close()
    assert sorted(ran) == sorted(
        [(k, n) for k in ("a", "b", "c") for n in range(6)] + [("plain", n) for n in range(6)]
    )
    assert max(most.values()) <= 2, most


# -- concurrent claimers (PostgreSQL: claims in many sessions at once) ---------------------


async def test_concurrent_claimers_never_pass_a_keys_limit(pg_url: str) -> None:
    """Twelve claims at once, of two queues a key spans, round after round: each key's running
    jobs never pass its limit. (Claimers that see the same jobs collide on their rows; it is
    claimers of different queues, or priorities, that pick different rows of one key, and
    a count in the claim's own snapshot would let both see room: the key's lock stops it.)"""
    app = skiplock.App(pg_url)
    await app.migrate()
    backend = await app.backend()
    limits = {"k": 3, "j": 2, "i": 1}
    try:
        for round_ in range(15):
            jobs = [
                NewJob("t", queue, "[]", "{}", 0, 3, concurrency_key=key, key_limit=limit)
                for key, limit in limits.items()
                for queue in ("a", "b")
                for _ in range(4)
            ]
            ids = await backend.job_insert_many(JobInsertManyParams(jobs))
            keys = dict(zip(ids, (j.concurrency_key for j in jobs), strict=True))
            claims = [
                backend.job_get_available_keyed(
                    dataclasses.replace(claim(5, f"t{round_}-{i}"), queues=("ab"[i % 2],))
                )
                for i in range(12)
            ]
            taken = [job for batch in await asyncio.gather(*claims) for job in batch]
            per_key = collections.Counter(keys[j.id] for j in taken)
            assert all(per_key[k] <= limits[k] for k in per_key), (round_, per_key)
            await _finish(backend, taken)
            while taken := await backend.job_get_available_keyed(claim(50, f"d{round_}")):
                await _finish(backend, taken)  # drained: the next round starts empty
    finally:
        await app.close()


async def _finish(backend: Any, jobs: list[ClaimedJob]) -> None:
    done = [Completion(j.id, j.lease_token, Disposition.SUCCEED) for j in jobs]
    await backend.job_set_state_if_running_many(done)


# -- the claim's properties, both backends --------------------------------------------------

EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    # one app for all examples, on purpose: each example uses keys of its own
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
_examples = itertools.count()

Step = tuple[str, int, int]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.integers(0, 4), st.integers(1, 6)),
        st.tuples(st.just("claim"), st.integers(1, 12), st.just(0)),
        st.tuples(st.just("finish"), st.integers(0, 20), st.just(0)),
        st.tuples(st.just("crash"), st.just(0), st.just(0)),
    ),
    min_size=1,
    max_size=25,
)


class Harness:
    """One loop, one clocked app for every example of a test (each example its own keys)."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.app = skiplock.App(url, clock=self.clock)
        self.run(self.app.migrate())
        self.backend = self.run(self.app.backend())

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.app.close())
        self.loop.close()


@pytest.fixture
def harness(db_url: str) -> Iterator[Harness]:
    the_harness = Harness(db_url)
    yield the_harness
    the_harness.close()


@given(limits=st.lists(st.integers(1, 3), min_size=1, max_size=5), steps=STEPS)
@EXAMPLES
def test_no_key_passes_its_limit_and_no_ready_job_waits_forever(
    harness: Harness, limits: list[int], steps: list[Step]
) -> None:
    """Random keys and limits, enqueues, claims, finishes and crashes (every lease lost): a
    key's running jobs never pass its limit, and once nothing else happens, claiming and
    finishing runs every job (none is left behind a key or a turn)."""
    harness.run(_property(harness, limits, steps, next(_examples)))


async def _property(h: Harness, limits: list[int], steps: list[Step], example: int) -> None:
    backend, tokens = h.backend, itertools.count()
    keys = [f"e{example}-k{i}" for i in range(len(limits))]
    limit_of = dict(zip(keys, limits, strict=True))
    key_of: dict[int, str] = {}
    running: dict[int, ClaimedJob] = {}
    enqueued = 0

    async def claim_some(n: int) -> list[ClaimedJob]:
        jobs = await backend.job_get_available_keyed(claim(n, f"e{example}:{next(tokens)}"))
        for job in jobs:
            assert job.id not in running, "claimed twice"
            running[job.id] = job
        held = collections.Counter(key_of[i] for i in running)
        assert all(held[k] <= limit_of[k] for k in held), (held, limit_of)
        return jobs

    for op, a, b in steps:
        if op == "enqueue":
            key = keys[a % len(keys)]
            job = NewJob(
                "t", "default", "[]", "{}", 0, 1000, concurrency_key=key, key_limit=limit_of[key]
            )
            ids = await backend.job_insert_many(JobInsertManyParams([job] * b))
            key_of.update(dict.fromkeys(ids, key))
            enqueued += b
        elif op == "claim":
            await claim_some(a)
        elif op == "finish" and running:
            job = list(running.values())[a % len(running)]
            await _finish(backend, [running.pop(job.id)])
        elif op == "crash":
            h.clock.advance(120)  # every lease expires: the workers holding them died
            reclaimed = await backend.job_reclaim_expired()
            assert sorted(reclaimed) == sorted(running)
            running.clear()
    for _ in range(enqueued + 1):  # a claim takes at least one job while any is left
        await _finish(backend, list(running.values()))
        running.clear()
        if not await claim_some(12):
            break
    assert not await backend.job_ready_exists(None)
    counts = await backend.job_count_by_state()
    assert counts.get("pending", 0) == counts.get("running", 0) == 0, counts


async def test_busiest_keys_reads_live_keyed_jobs_busiest_first(app: skiplock.App) -> None:
    @app.task(name="a", queue="qa", concurrency_key=lambda n: f"k{n}", key_limit=2)
    def a(n: int) -> None: ...

    @app.task(name="b", queue="qb", concurrency_key="shared")
    def b() -> None: ...

    await app.enqueue_many([a.prepare(1), a.prepare(2), a.prepare(2), b.prepare()])
    backend = await app.backend()
    await backend.job_get_available_keyed(claim(1, "tok"))  # k1's one job runs
    loads = await app.busiest_keys()
    assert [(k.key, k.running, k.ready, k.key_limit) for k in loads] == [
        ("k1", 1, 0, 2),
        ("k2", 0, 2, 2),
        ("shared", 0, 1, None),
    ]
    assert [k.key for k in await app.busiest_keys(1)] == ["k1"]
    assert [k.key for k in await app.busiest_keys(queue="qb")] == ["shared"]
    assert [k.key for k in await app.busiest_keys(task="a")] == ["k1", "k2"]
    with pytest.raises(ConfigurationError, match="limit=0: must be between 1 and 1000"):
        await app.busiest_keys(0)
