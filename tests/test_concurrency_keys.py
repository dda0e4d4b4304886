"""Concurrency keys end to end (issue 25): the options checked at the edge, a worker keeping
every key within its limit, concurrent claimers on PostgreSQL, and a property test of the
claim on both backends over random keys, limits and crash points."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import json
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import skiplock
from skiplock import ConfigurationError
from skiplock._backends.params import (
    ClaimParams,
    JobActionParams,
    JobInsertManyParams,
    JobListParams,
)
from skiplock._job import ClaimedJob, Completion, Disposition, JobFilter, JobState, NewJob
from skiplock._limits import MAX_KEY_LIMIT, MAX_TEXT_CHARS
from skiplock._worker.worker import Worker

from .helpers import FakeClock, LoopHarness

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
        ({"key_weight": 2}, "key_weight=2: weighs the turns of one concurrency key"),
        ({"concurrency_key": "k", "key_weight": 0}, "key_weight=0: must be between 1 and 1000"),
        ({"concurrency_key": "k", "key_weight": 1001}, "must be between 1 and 1000"),
        ({"concurrency_key": "k", "key_weight": 1.5}, "key_weight=1.5: must be an int"),
        (
            {"concurrency_key": "k", "key_weight": 2, "fair": False},
            "key_weight=2: weighs turns, which fair=False turns off",
        ),
        ({"fair": False}, "fair=False: turns a concurrency key's turns off"),
        ({"concurrency_key": "k", "fair": "no"}, "fair='no': must be True or False"),
        ({"ordering_key": "k", "key_weight": 2}, "key_weight=2: weighs the turns"),
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


class Harness(LoopHarness):
    """One loop, one clocked app and its backend for every example of a test (each example
    its own keys)."""

    def __init__(self, url: str) -> None:
        clock = FakeClock()
        super().__init__(url, clock)
        self.clock: FakeClock = clock
        self.backend = self.run(self.app.backend())


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


# -- ordered keys ---------------------------------------------------------------------------


def test_ordering_key_options_are_checked_where_they_are_given(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)

    def fn(n: int) -> None: ...

    cases = [
        ({"ordering_key": ""}, "ordering_key='': must be a non-empty string"),
        ({"ordering_key": "o", "key_limit": 2}, "ordering_key='o': runs its key's jobs one at"),
        ({"ordering_key": "o", "concurrency_key": "c"}, "give it without concurrency_key="),
        ({"ordering_key": "o", "ordering_on_dead": "retry"}, "ordering_on_dead='retry': must"),
    ]
    for options, message in cases:
        with pytest.raises(ConfigurationError, match=message):
            app.task(name="t", **options)(fn)
    task = app.task(name="ok", ordering_key=lambda n: f"n{n % 2}", ordering_on_dead="skip")(fn)
    job = task.prepare(3)
    assert (job.concurrency_key, job.key_limit, job.key_order) == ("n1", 1, "skip")
    assert task.using(ordering_key="x").prepare(1).key_order == "skip"


OrderedStep = tuple[str, int, int]
ORDERED_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.integers(0, 2), st.integers(1, 4)),
        st.tuples(st.just("claim"), st.integers(1, 8), st.just(0)),
        st.tuples(st.sampled_from(["succeed", "retry", "die"]), st.integers(0, 20), st.just(0)),
        st.tuples(st.just("crash"), st.just(0), st.just(0)),
    ),
    min_size=1,
    max_size=30,
)


@given(on_dead=st.sampled_from(["block", "skip"]), steps=ORDERED_STEPS)
@example(
    on_dead="skip", steps=[("enqueue", 0, 2), ("claim", 4, 0), ("retry", 0, 0), ("claim", 4, 0)]
)
@example(
    on_dead="block", steps=[("enqueue", 0, 2), ("claim", 4, 0), ("die", 0, 0), ("claim", 4, 0)]
)
@EXAMPLES
def test_an_ordered_key_runs_one_job_at_a_time_in_enqueue_order(
    harness: Harness, on_dead: str, steps: list[OrderedStep]
) -> None:
    """Random enqueues, claims, outcomes (success, a retry, death) and crashes: an ordered
    key never runs two jobs at once, only ever starts its oldest live job, and (with
    ``skip``) finishes every job in enqueue order."""
    harness.run(_ordered_property(harness, on_dead, steps, next(_examples)))


class OrderedRun:
    """One example of the ordered property: what the test knows of each job, checked at
    every claim."""

    def __init__(self, h: Harness, on_dead: str, example: int) -> None:
        self.h, self.on_dead, self.example = h, on_dead, example
        self.keys = [f"e{example}-o{i}" for i in range(3)]
        self.tokens = itertools.count()
        self.key_of: dict[int, str] = {}
        self.live: set[int] = set()  # pending or running, by this test's account
        self.running: dict[int, ClaimedJob] = {}
        self.succeeded: list[int] = []
        self.blocked: set[str] = set()  # keys a dead job holds ("block")

    async def enqueue(self, key: str, n: int) -> None:
        job = NewJob("t", "default", "[]", "{}", 0, 1000, concurrency_key=key, key_limit=1,
                     key_order=self.on_dead)  # fmt: skip
        ids = await self.h.backend.job_insert_many(JobInsertManyParams([job] * n))
        self.key_of.update(dict.fromkeys(ids, key))
        self.live.update(ids)

    async def claim(self, n: int) -> list[ClaimedJob]:
        token = f"o{self.example}:{next(self.tokens)}"
        jobs = await self.h.backend.job_get_available_keyed(claim(n, token))
        for job in jobs:
            key = self.key_of[job.id]
            assert not any(self.key_of[i] == key for i in self.running), "two at once"
            assert key not in self.blocked, "ran past a dead job that blocks its key"
            oldest = min(i for i in self.live if self.key_of[i] == key)
            assert job.id == oldest, "not the key's oldest live job"
            self.running[job.id] = job
        return jobs

    async def outcome(self, job: ClaimedJob, disposition: Disposition) -> None:
        delay = 5.0 if disposition is Disposition.RETRY else 0.0
        done = Completion(job.id, job.lease_token, disposition, delay_s=delay)
        await self.h.backend.job_set_state_if_running_many([done])
        del self.running[job.id]
        if disposition is Disposition.SUCCEED:
            self.succeeded.append(job.id)
        if disposition is not Disposition.RETRY:
            self.live.discard(job.id)
        if disposition is Disposition.DEAD and self.on_dead == "block":
            self.blocked.add(self.key_of[job.id])

    async def step(self, op: str, a: int, b: int) -> None:
        outcomes = {"succeed": Disposition.SUCCEED, "retry": Disposition.RETRY}
        if op == "enqueue":
            await self.enqueue(self.keys[a], b)
        elif op == "claim":
            await self.claim(a)
        elif op in ("succeed", "retry", "die") and self.running:
            job = list(self.running.values())[a % len(self.running)]
            await self.outcome(job, outcomes.get(op, Disposition.DEAD))
        elif op == "crash":
            self.h.clock.advance(120)
            assert sorted(await self.h.backend.job_reclaim_expired()) == sorted(self.running)
            self.running.clear()

    async def finish_all(self) -> None:
        """Succeed everything that can still run (retries come due first)."""
        self.h.clock.advance(10)
        for _ in range(len(self.key_of) + 1):
            for job in list(self.running.values()):
                await self.outcome(job, Disposition.SUCCEED)
            if not await self.claim(8):
                break


async def _ordered_property(h: Harness, on_dead: str, steps: list[OrderedStep], ex: int) -> None:
    run = OrderedRun(h, on_dead, ex)
    for op, a, b in steps:
        await run.step(op, a, b)
    await run.finish_all()
    if on_dead == "skip":
        assert not run.live, "every job of a skip key finishes"
        for key in run.keys:
            mine = [i for i in run.succeeded if run.key_of[i] == key]
            assert mine == sorted(mine), "finished out of enqueue order"
    else:
        assert not await h.backend.job_ready_exists(None)
    await _drain_blocked(h.backend)


async def _drain_blocked(backend: Any) -> None:
    """Leave nothing live for the next example: cancel what a dead job still blocks."""
    pending = JobListParams(JobFilter(), state=JobState.PENDING)
    while page := await backend.job_list(pending):
        for record in page:
            await backend.job_cancel(JobActionParams(record.id, who="test"))


async def test_blocked_keys_name_the_dead_job_until_a_person_discards_it(
    app: skiplock.App,
) -> None:
    @app.task(name="step", ordering_key=lambda order, n: f"order:{order}")
    def step(order: int, n: int) -> None: ...

    await app.enqueue_many([step.prepare(1, n) for n in range(3)] + [step.prepare(2, 0)])
    backend = await app.backend()
    first, other = await backend.job_get_available_keyed(claim(10, "tok"))
    assert (json.loads(first.args_json), json.loads(other.args_json)) == ([1, 0], [2, 0])
    await backend.job_set_state_if_running_many(
        [Completion(first.id, first.lease_token, Disposition.DEAD)]
    )
    assert await app.blocked_keys() == [skiplock.BlockedKey("order:1", first.id, 2)]
    assert (await app.stats()).blocked_keys == (skiplock.BlockedKey("order:1", first.id, 2),)
    assert await backend.job_get_available_keyed(claim(10, "t2")) == []
    assert await app.discard_dead(JobFilter(task="step"), who="test") == [first.id]
    assert await app.blocked_keys() == []
    (second,) = await backend.job_get_available_keyed(claim(10, "t3"))
    assert json.loads(second.args_json) == [1, 1]


async def test_an_ordered_keys_next_job_is_claimed_once_the_one_before_is_written(
    app: skiplock.App,
) -> None:
    """The slot a job held frees when its outcome is in the table, after the worker's slot
    did: the worker claims again then, not at its poll (60 s here), so a chain of one key's
    jobs runs back to back."""
    ran: list[int] = []
    last = asyncio.Event()

    @app.task(name="chain", ordering_key="k")
    async def chain(n: int) -> None:
        ran.append(n)
        if n == 5:
            last.set()

    await app.enqueue_many([chain.prepare(n) for n in range(6)])
    worker = Worker(app, poll_interval_s=60, scheduler=False)
    run = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(last.wait(), 20)
    finally:
        worker.request_stop()
        await asyncio.wait_for(run, 10)
    assert ran == list(range(6))


async def test_the_keyed_jobs_a_worker_waits_on_forget_a_lost_lease(
    app: skiplock.App,
) -> None:
    """The producer remembers the keyed jobs whose outcomes it waits for (their writes free
    key slots, and wake it); a lease lost to another worker is never written by this one, so
    its id leaves the set at the next keyed claim instead of staying for the worker's life."""
    release = asyncio.Event()
    first_started = asyncio.Event()
    second_ran = asyncio.Event()

    @app.task(name="slow", concurrency_key=lambda n: f"k{n}")
    async def slow(n: int) -> None:
        if n == 1:
            first_started.set()
            await release.wait()
        else:
            second_ran.set()

    first = await slow.aenqueue(1)
    worker = Worker(app, poll_interval_s=0.05, scheduler=False)
    run = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(first_started.wait(), 20)  # the worker and its producer are up
        producer = worker._producer
        assert producer is not None and first.id in producer._keyed_held
        lease = producer.ledger.lease(first.id)
        assert lease is not None
        producer.ledger.lost(first.id, lease.job.lease_token)  # as a beat finding it gone
        await slow.aenqueue(2)  # the next keyed claim
        await asyncio.wait_for(second_ran.wait(), 20)
        assert first.id not in producer._keyed_held
    finally:
        release.set()
        worker.request_stop()
        await asyncio.wait_for(run, 10)
