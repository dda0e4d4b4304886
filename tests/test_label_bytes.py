"""Keys and names bounded in UTF-8 bytes at the edge, the same on both databases (issue 43,
item 6).

The attack: a key within the old 1,000-character check but over PostgreSQL's btree entry limit
(2,704 bytes), made of multi-byte characters that do not compress (random CJK). PostgreSQL
refused the row with a raw index error that took the whole batch with it; SQLite took it. Now
every label an index holds is checked in bytes where it is given, or where a key function
gives it, and a batch is refused before anything is written; at exactly the limit, in every
labelled column at once, both databases take the jobs and a worker runs them.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import skiplock
from skiplock import ConfigurationError, Worker, WorkerConfig
from skiplock._limits import MAX_TEXT_BYTES

OLD_CHARACTER_LIMIT = 1000


def cjk(size: int, seed: int = 7) -> str:
    """``size`` bytes of UTF-8: random CJK ideographs (3 bytes each, which no compression
    shrinks), then ASCII for the rest."""
    rnd = random.Random(seed)
    text = "".join(chr(rnd.randrange(0x4E00, 0x9FFF)) for _ in range(size // 3))
    return text + "x" * (size % 3)


def astral(size: int, seed: int = 11) -> str:
    """``size`` (a multiple of 4) bytes of UTF-8: random characters of 4 bytes each."""
    rnd = random.Random(seed)
    return "".join(chr(rnd.randrange(0x20000, 0x2A6DF)) for _ in range(size // 4))


BIG = cjk(2701)


def test_the_attacking_key_is_within_the_old_character_limit() -> None:
    assert len(BIG.encode()) == 2701 and len(BIG) == 901 < OLD_CHARACTER_LIMIT
    assert len(astral(MAX_TEXT_BYTES).encode()) == MAX_TEXT_BYTES


def _refusal(option: str, task: str = "sync") -> str:
    return rf"task '{task}': {option}='.*'\.\.\. is 2701 bytes of UTF-8 \(901 characters\): "


@pytest.mark.parametrize(
    "option", ["concurrency_key", "ordering_key", "unique_key", "correlation_id", "queue"]
)
async def test_a_label_over_the_byte_limit_is_refused_naming_it_on_both_databases(
    app: skiplock.App, option: str
) -> None:
    @app.task(name="sync")
    async def sync(tenant: str) -> None: ...

    with pytest.raises(ConfigurationError, match=_refusal(option)):
        await sync.using(**{option: BIG}).aenqueue("acme")
    assert sum((await app.counts()).values()) == 0


@pytest.mark.parametrize("option", ["concurrency_key", "ordering_key", "unique_key"])
async def test_a_key_function_giving_a_long_key_fails_its_batch_before_anything_is_written(
    app: skiplock.App, option: str
) -> None:
    @app.task(name="sync", **{option: lambda tenant: tenant})
    async def sync(tenant: str) -> None: ...

    tenants = ["acme", "bob", BIG, "carol"]
    with pytest.raises(ConfigurationError, match=_refusal(option)):
        await app.enqueue_many(sync.prepare(t) for t in tenants)
    assert sum((await app.counts()).values()) == 0
    handles = await app.enqueue_many(sync.prepare(t) for t in tenants if t != BIG)
    assert len(handles) == 3  # the good jobs alone go in


async def test_a_job_changed_after_prepare_is_refused_by_its_place_in_the_batch(
    app: skiplock.App,
) -> None:
    @app.task(name="sync", concurrency_key=lambda tenant: tenant)
    async def sync(tenant: str) -> None: ...

    jobs = [sync.prepare(t) for t in ("acme", "bob", "carol")]
    jobs[1].concurrency_key = BIG
    with pytest.raises(
        ConfigurationError,
        match=r"job 2 of 3 \(task 'sync'\): concurrency_key='.*'\.\.\. is 2701 bytes of "
        r"UTF-8 \(901 characters\): must be at most 1000 bytes \(nothing was enqueued\)",
    ):
        await app.enqueue_many(jobs)
    assert sum((await app.counts()).values()) == 0


async def test_every_label_at_the_limit_at_once_is_taken_and_run_on_both_databases(
    app: skiplock.App,
) -> None:
    """The widest index entries: queue and concurrency key together (the keyed claim's walk),
    a unique key and its task's name together (the key table), each of exactly 1,000 bytes
    that do not compress."""
    queue, name = astral(MAX_TEXT_BYTES, 1), astral(MAX_TEXT_BYTES, 2)
    ran: list[str] = []

    @app.task(name=name, queue=queue, concurrency_key=lambda k: k, key_limit=1)
    async def keyed(k: str) -> None:
        ran.append("keyed")

    @app.task(name=astral(MAX_TEXT_BYTES, 3), queue=queue, ordering_key=lambda k: k)
    async def ordered(k: str) -> None:
        ran.append("ordered")

    @app.task(name=astral(MAX_TEXT_BYTES, 4), queue=queue)
    async def unique(k: str) -> None:
        ran.append("unique")

    key = cjk(MAX_TEXT_BYTES, 5)
    assert len(key.encode()) == MAX_TEXT_BYTES
    options: dict[str, Any] = {"unique_key": astral(MAX_TEXT_BYTES, 6)}
    await keyed.aenqueue(astral(MAX_TEXT_BYTES, 8))
    await ordered.using(correlation_id=astral(MAX_TEXT_BYTES, 9)).aenqueue(key)
    first = await unique.using(**options).aenqueue("a")
    assert (await unique.using(**options).aenqueue("b")).id == first.id  # the key holds
    await Worker(app, WorkerConfig(queues=(queue,), poll_interval_s=0.05)).run(burst=True)
    assert sorted(ran) == ["keyed", "ordered", "unique"]
    assert (await app.counts())["succeeded"] == 3


def test_schedule_and_worker_names_are_bounded_the_same_way(sqlite_url: str) -> None:
    app = skiplock.App(sqlite_url)

    @app.task(name="tick")
    async def tick() -> None: ...

    with pytest.raises(ConfigurationError, match=r"name='.*'\.\.\. is 2701 bytes of UTF-8"):
        app.schedule(tick, "* * * * *", name=BIG)
    app.schedule(tick, "* * * * *", name=cjk(MAX_TEXT_BYTES))
    with pytest.raises(ConfigurationError, match=r"name='.*'\.\.\. is 2701 bytes of UTF-8"):
        WorkerConfig(name=BIG)
    assert WorkerConfig(name=cjk(MAX_TEXT_BYTES)).name


def test_a_key_utf8_cannot_encode_is_refused_where_it_is_given(sqlite_url: str) -> None:
    """A lone surrogate: both drivers fail it with a UnicodeEncodeError mid-batch."""
    app = skiplock.App(sqlite_url)

    @app.task(name="sync", concurrency_key=lambda n: f"tenant\ud800{n}")
    async def sync(n: int) -> None: ...

    with pytest.raises(ConfigurationError, match=r"concurrency_key='tenant\\ud8007': is not val"):
        sync.prepare(7)
