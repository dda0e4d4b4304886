"""``wait_for(name, with_sender=True)`` tells a job who sent the signal it takes (issue 43, item
7), on both databases: an approval that trusts the sender, not a field of the payload anyone
could type; the default sender (``user@host``); a sync task; a signal stored before senders
were recorded. Before, ``wait_for`` returned the payload alone (``with_sender`` was a
TypeError), and the guide's approval read ``decision['by']`` from the payload."""

from __future__ import annotations

import getpass
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import skiplock
from skiplock import JobState, ReceivedSignal, SignalOutcome

MANAGERS = {"ann", "bob"}


def refund_task(app: skiplock.App) -> Any:
    @app.task(name="refund")
    async def refund(order_id: int) -> str:
        job = skiplock.current_job()
        while True:  # a signal from anyone else is no approval: wait for the next one
            approval = await job.wait_for("approved", timeout=3600, with_sender=True)
            if approval.sender in MANAGERS:
                return f"order {order_id} refunded, approved by {approval.sender}"

    return refund


async def test_an_approval_trusts_who_sent_it_not_what_the_payload_says(
    app: skiplock.App,
) -> None:
    refund = refund_task(app)
    job = await refund.aenqueue(17)
    await app.drain()
    forged = await app.signal(job.id, "approved", {"by": "ann"}, who="mallory")
    assert forged.outcome is SignalOutcome.DELIVERED
    await app.drain()
    assert (await job.fetch()).state is JobState.WAITING  # mallory is no manager: it waits
    assert (await app.signal(job.id, "approved", who="bob")).outcome is SignalOutcome.DELIVERED
    await app.drain()
    assert await job.result(timeout=10) == "order 17 refunded, approved by bob"


async def test_the_received_signal_holds_its_payload_sender_and_time(app: skiplock.App) -> None:
    got: list[ReceivedSignal] = []

    @app.task(name="listen")
    async def listen() -> None:
        job = skiplock.current_job()
        got.append(await job.wait_for("a", with_sender=True))
        got.append(await job.wait_for("a", with_sender=True))
        assert await job.wait_for("a") == [3]  # the payload alone, as before

    synced: list[ReceivedSignal] = []

    @app.task(name="listen_sync")
    def listen_sync() -> None:
        synced.append(skiplock.current_job().wait_for_sync("b", 60, with_sender=True))

    before = datetime.now(UTC) - timedelta(seconds=5)
    job = await listen.aenqueue()
    await app.signal(job.id, "a", {"n": 1}, who="ann via dashboard")
    await app.signal(job.id, "a")  # no who: the person at this machine
    await app.signal(job.id, "a", [3], who="ann")
    sync = await listen_sync.aenqueue()
    await app.signal(sync.id, "b", "hi", who="cy")
    await app.drain()
    assert (await job.fetch()).state is JobState.SUCCEEDED
    assert [(g.name, g.payload, g.sender) for g in got + synced] == [
        ("a", {"n": 1}, "ann via dashboard"),
        ("a", None, f"{getpass.getuser()}@{socket.gethostname()}"),
        ("b", "hi", "cy"),
    ]
    for g in got + synced:
        assert g.at is not None and before <= g.at <= datetime.now(UTC) + timedelta(seconds=5)


async def test_with_sender_must_be_a_bool(app: skiplock.App) -> None:
    @app.task(name="odd", max_attempts=1)
    async def odd() -> Any:
        return await skiplock.current_job().wait_for("a", with_sender="yes")  # type: ignore[call-overload]

    job = await odd.aenqueue()
    await app.signal(job.id, "a", 1)
    await app.drain()
    record = await job.fetch()
    assert record.state is JobState.DEAD
    assert record.errors[-1]["message"] == ("ConfigurationError: with_sender='yes': must be a bool")


async def test_a_signal_stored_before_senders_has_none(db_url: str) -> None:
    """A signal an older skiplock stored (no sender) is taken with ``sender=None``."""
    app = skiplock.App(db_url)
    await app.migrate()
    try:
        got: list[ReceivedSignal] = []

        @app.task(name="old")
        async def old() -> None:
            got.append(await skiplock.current_job().wait_for("a", with_sender=True))

        job = await old.aenqueue()
        await app.signal(job.id, "a", "x", who="ann")
        backend: Any = await app.backend()
        forget = "UPDATE {s}skiplock_signals SET sender = NULL"
        if hasattr(backend, "pool"):
            await backend.pool.execute(forget.format(s=f'"{backend.schema}".'))
        else:
            import sqlite3

            with sqlite3.connect(app.url.removeprefix("sqlite:///")) as conn:
                conn.execute(forget.format(s=""))
        await app.drain()
        assert [(g.payload, g.sender) for g in got] == [("x", None)]
    finally:
        await app.close()


@pytest.mark.parametrize("who", ["", "bob"])
async def test_the_audit_trail_names_the_same_sender(app: skiplock.App, who: str) -> None:
    """What the job is told and what the audit trail says are the same words."""
    refund = refund_task(app)
    job = await refund.aenqueue(1)
    await app.signal(job.id, "approved", who=who)
    (entry,) = [e for e in await app.audit_trail() if e.what == "signal"]
    assert entry.who == (who or f"{getpass.getuser()}@{socket.gethostname()}")
    assert (await app.get_job(job.id)).audit[-1]["who"] == entry.who
