"""``skiplock.testing``: eager mode, throw-away databases, ``app.drain()`` and the fixture."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import skiplock
from skiplock import Cancel, JobCancelled, JobFailed, JobState, current_job
from skiplock.testing import eager, skiplock_app, temporary_database

from .conftest import PG_URL

__all__ = ["skiplock_app"]  # the plugin's fixture, used below


def nowhere_app(tmp_path: Path, **options: object) -> skiplock.App:
    """An app whose database cannot be opened: eager mode must never touch it."""
    return skiplock.App(f"sqlite:///{tmp_path}/missing/dir/jobs.db", **options)  # type: ignore[arg-type]


async def test_eager_runs_at_enqueue_with_a_json_round_trip(tmp_path: Path) -> None:
    app = nowhere_app(tmp_path, eager=True)
    seen: list[object] = []

    @app.task(name="echo")
    async def echo(pair: tuple[int, int], *, label: str) -> tuple[str, int]:
        seen.append((pair, label, current_job().task))
        return (label, sum(pair))

    handle = await echo.aenqueue((1, 2), label="x")
    assert seen == [([1, 2], "x", "echo")]  # a tuple arrives as a list, as on a worker
    assert await handle.result() == ["x", 3]
    assert await app.gather([handle]) == [["x", 3]]


def test_eager_sync_enqueue_and_sync_tasks(tmp_path: Path) -> None:
    """Sync code (no running loop): result_sync() inside one is refused, eager or not, as a
    worker's process would have to."""
    app = nowhere_app(tmp_path, eager=True)

    @app.task(name="inc")
    def inc(x: int) -> int:
        return x + 1

    handle = inc.enqueue(41)
    assert handle.result_sync() == 42


async def test_eager_rejects_what_a_worker_would(tmp_path: Path) -> None:
    app = nowhere_app(tmp_path, eager=True, max_result_bytes=100)

    @app.task(name="takes")
    def takes(x: object) -> None:
        pass

    @app.task(name="gives")
    def gives(kind: str) -> object:
        return {"set": {1}, "big": "x" * 200, "when": datetime.now(UTC)}[kind]

    with pytest.raises(TypeError, match="takes"):
        await takes.aenqueue(datetime.now(UTC))
    with pytest.raises(TypeError, match=r"'gives'.*\(set\)"):
        await gives.aenqueue("set")
    with pytest.raises(TypeError, match=r"'gives'.*\(datetime\)"):
        await gives.aenqueue("when")
    with pytest.raises(skiplock.PayloadTooLarge, match="max_result_bytes"):
        await gives.aenqueue("big")


async def test_eager_failures_are_outcomes_as_on_a_worker(tmp_path: Path) -> None:
    app = nowhere_app(tmp_path, eager=True)

    @app.task(name="boom")
    def boom() -> None:
        raise ValueError("bad input")

    @app.task(name="nope")
    async def nope() -> None:
        raise Cancel("not today")

    with pytest.raises(JobFailed, match="bad input") as caught:
        await (await boom.aenqueue()).result()
    assert caught.value.error_type == "ValueError"
    with pytest.raises(JobCancelled, match="not today"):
        await (await nope.aenqueue()).result()


def test_eager_is_a_context_manager_and_a_checked_option(tmp_path: Path) -> None:
    app = nowhere_app(tmp_path)

    @app.task(name="one")
    def one() -> int:
        return 1

    with eager(app):
        assert one.enqueue().result_sync() == 1
    assert not app.eager and not app.eager_outcomes
    with pytest.raises(skiplock.ConfigurationError, match="eager"):
        skiplock.App("sqlite:///x.db", eager="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("server", ["sqlite", "postgres"])
async def test_drain_on_a_temporary_database(server: str) -> None:
    app = skiplock.App("sqlite:///unused.db")

    @app.task(name="sq")
    def sq(x: int) -> int:
        if x < 0:
            raise Cancel("negative")
        return x * x

    url = PG_URL if server == "postgres" else None
    async with temporary_database(app, url):
        assert app.url != "sqlite:///unused.db"
        handles = await app.enqueue_many(sq.prepare(x) for x in (2, 3, -1))
        outcomes = await app.drain()
        by_id = {o.id: o for o in outcomes}
        assert [by_id[h.id].state for h in handles] == [
            JobState.SUCCEEDED,
            JobState.SUCCEEDED,
            JobState.CANCELLED,
        ]
        assert await app.gather(handles[:2]) == [4, 9]
        assert await app.drain() == []
    assert app.url == "sqlite:///unused.db"


async def test_the_fixture_gives_a_migrated_app(skiplock_app: skiplock.App) -> None:
    @skiplock_app.task(name="hi")
    async def hi(name: str) -> str:
        return f"hi {name}"

    handle = await hi.aenqueue("there")
    await skiplock_app.drain()
    assert await handle.result(timeout=5) == "hi there"
