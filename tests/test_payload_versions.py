"""Payload versions (seed 002's last rule), on both databases: a task declares its payload's
version and how to bring older payloads up to it; the version is stored on the row at
enqueue; a worker upcasts an older payload before the call, and leaves a newer one (a
rolled-back deploy) for a worker that knows it, until a bound, then dead saying why."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import skiplock
from skiplock import JobState
from skiplock._worker.executor import NEWER_PAYLOAD_PATIENCE_S, NEWER_PAYLOAD_RETRY_S

from .apps import cli_app
from .helpers import APP, Cli, FakeClock


def v1_to_v2(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    (email,) = args  # v1: send(email); v2: send(email, lang)
    return [email, "en"], kwargs


def v2_to_v3(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    email, lang = args  # v3: send(to=..., lang=...)
    return [], {"to": email, "lang": lang}


async def enqueued_by(url: str, version: int, *args: Any, **kwargs: Any) -> int:
    """The id of a job of task "send" written by another deploy, whose task is at ``version``."""
    deploy = skiplock.App(url)

    @deploy.task(name="send", version=version)
    async def send(*_args: Any, **_kwargs: Any) -> None:
        pass

    try:
        return (await send.aenqueue(*args, **kwargs)).id
    finally:
        await deploy.close()


async def test_the_version_is_stored_at_enqueue(app: skiplock.App) -> None:
    @app.task(name="send", version=2, upcast={1: v1_to_v2})
    async def send(email: str, lang: str) -> None:
        pass

    handle = await send.aenqueue("a@example.com", "fr")
    assert (await handle.fetch()).payload_version == 2
    assert send.prepare("b@example.com", "en").payload_version == 2


async def test_older_payloads_are_upcast_through_the_chain(app: skiplock.App, db_url: str) -> None:
    v1 = await enqueued_by(db_url, 1, "a@example.com")  # the deploy before last
    v2 = await enqueued_by(db_url, 2, "b@example.com", "fr")  # the last deploy
    seen: list[dict[str, str]] = []

    @app.task(name="send", version=3, upcast={1: v1_to_v2, 2: v2_to_v3})
    async def send(*, to: str, lang: str) -> str:
        seen.append({"to": to, "lang": lang})
        return f"{to}/{lang}"

    assert [(await app.get_job(i)).payload_version for i in (v1, v2)] == [1, 2]
    await app.drain()
    assert await (await app.job(v1)).result(timeout=30) == "a@example.com/en"  # 1 -> 2 -> 3
    assert await (await app.job(v2)).result(timeout=30) == "b@example.com/fr"  # 2 -> 3
    assert len(seen) == 2


async def test_a_newer_payload_is_left_for_a_worker_that_knows_it(
    app: skiplock.App, db_url: str
) -> None:
    handle = await app.job(await enqueued_by(db_url, 3, to="a@example.com", lang="en"))
    ran: list[object] = []

    @app.task(name="send", version=2, upcast={1: v1_to_v2})  # the rolled-back deploy
    async def send(email: str, lang: str) -> None:
        ran.append(email)

    await app.drain()
    row = await handle.fetch()
    assert ran == []
    assert row.state is JobState.PENDING and row.attempt == 0  # its attempt given back
    assert "payload version 3 is newer" in row.errors[-1]["message"]
    waits = (row.run_at - row.attempted_at).total_seconds()  # type: ignore[operator]
    assert 0 < waits <= NEWER_PAYLOAD_RETRY_S + 1


async def test_a_newer_payload_goes_dead_after_the_bound(db_url: str, clock: FakeClock) -> None:
    writer = skiplock.App(db_url, clock=clock)
    runner = skiplock.App(db_url, clock=clock)
    try:
        await writer.migrate()

        @writer.task(name="send", version=3)
        async def send_v3(*, to: str) -> None:
            pass

        @runner.task(name="send", version=2)
        async def send(email: str, lang: str) -> None:
            pass

        handle = await send_v3.aenqueue(to="a@example.com")
        clock.advance(NEWER_PAYLOAD_PATIENCE_S + 60)
        await runner.drain()
        row = await handle.fetch()
        assert row.state is JobState.DEAD
        assert "needs a worker that knows version 3" in row.errors[-1]["message"]
    finally:
        await writer.close()
        await runner.close()


async def test_a_missing_upcast_step_sends_the_job_dead_saying_which(
    app: skiplock.App, db_url: str
) -> None:
    handle = await app.job(await enqueued_by(db_url, 1, "a@example.com"))

    @app.task(name="send", version=3, upcast={2: v2_to_v3})
    async def send(*, to: str, lang: str) -> None:
        pass

    await app.drain()
    row = await handle.fetch()
    assert row.state is JobState.DEAD
    assert "payload version 1 has no upcast" in row.errors[-1]["message"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"version": 0}, "version"),
        ({"version": "2"}, "version"),
        ({"version": True}, "version"),
        ({"version": 2**31}, "version"),
        ({"version": 2, "upcast": {2: v1_to_v2}}, "upcast"),
        ({"version": 2, "upcast": {0: v1_to_v2}}, "upcast"),
        ({"version": 2, "upcast": {"1": v1_to_v2}}, "upcast"),
        ({"version": 2, "upcast": {1: "v1_to_v2"}}, "upcast[1]"),
        ({"upcast": {1: v1_to_v2}}, "upcast"),
    ],
)
def test_versions_and_upcasts_are_checked_at_definition(
    options: dict[str, Any], named: str
) -> None:
    app = skiplock.App("sqlite:///never-opened.db")  # a declaration opens nothing
    with pytest.raises(skiplock.ConfigurationError, match=named.replace("[", r"\[")):

        @app.task(name="t", **options)
        async def t() -> None:
            pass


@pytest.mark.slow
async def test_job_show_says_the_payload_version(db_url: str, tmp_path: Path) -> None:
    cli = Cli(db_url, tmp_path)
    assert cli.run("migrate", APP).returncode == 0
    cli_app.app.url = db_url
    try:
        handle = await cli_app.greet.aenqueue("ada", "fr")
    finally:
        await cli_app.app.close()
    shown = await asyncio.to_thread(cli.run, "job", "show", APP, str(handle.id))
    assert shown.returncode == 0, shown.stderr
    assert '"payload_version": 2' in shown.stdout
