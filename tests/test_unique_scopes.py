"""Unique keys are a task's own unless it shares them (issue 42), on both databases, written
as an application writes them: two tasks whose keys are built from the same order or user id.

A task's key never touches another task's jobs, whatever ``on_conflict`` says: ``keep`` never
hands back another task's job, ``replace`` never gives another task's job these arguments,
``debounce`` never takes the key of another task's running job (a send-once mail would go out
twice). ``unique_scope="shared"`` puts a task's keys in one key space with every other task
that says so: a job of any of them holds the key for all, and ``replace`` and ``debounce``
still act only on a holder of their own task."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import skiplock
from skiplock import ConfigurationError, DuplicateJob

from .helpers import running


async def test_two_tasks_building_one_key_string_keep_their_own_jobs(app: skiplock.App) -> None:
    ran: list[tuple[str, int]] = []

    @app.task(name="invoice", unique_key=lambda order: f"order:{order}")
    async def invoice(order: int) -> None:
        ran.append(("invoice", order))

    @app.task(name="receipt", unique_key=lambda order: f"order:{order}")
    async def receipt(order: int) -> None:
        ran.append(("receipt", order))

    first = await invoice.aenqueue(7)
    other = await receipt.aenqueue(7)  # keep (the default): not invoice's job
    assert other.id != first.id
    assert (await invoice.aenqueue(7)).id == first.id  # a task's own key still dedupes
    assert (await receipt.aenqueue(7)).id == other.id
    both = await app.enqueue_many([invoice.prepare(8), receipt.prepare(8), invoice.prepare(8)])
    assert len({h.id for h in both}) == 2 and both[0].id == both[2].id  # one batch, same rule
    await app.drain()
    assert sorted(ran) == [("invoice", 7), ("invoice", 8), ("receipt", 7), ("receipt", 8)]


async def test_replace_never_gives_another_tasks_job_its_arguments(app: skiplock.App) -> None:
    ran: list[tuple[str, str]] = []

    @app.task(name="charge", unique_key=lambda order, note: f"order:{order}")
    async def charge(order: int, note: str) -> None:
        ran.append(("charge", note))

    @app.task(name="refund", unique_key=lambda order, note: f"order:{order}", on_conflict="replace")
    async def refund(order: int, note: str) -> None:
        ran.append(("refund", note))

    charged = await charge.aenqueue(7, "charge 7")
    refunded = await refund.aenqueue(7, "refund 7")
    assert refunded.id != charged.id
    assert (await charged.fetch()).args == [7, "charge 7"]  # untouched
    again = await refund.aenqueue(7, "refund 7, amended")  # its own pending job: replaced
    assert again.id == refunded.id
    await app.drain()
    assert sorted(ran) == [("charge", "charge 7"), ("refund", "refund 7, amended")]


async def test_reject_is_about_the_tasks_own_jobs(app: skiplock.App) -> None:
    @app.task(name="export", unique_key="nightly")
    async def export() -> None: ...

    @app.task(name="backup", unique_key="nightly", on_conflict="reject")
    async def backup() -> None: ...

    exported = await export.aenqueue()
    backed_up = await backup.aenqueue()  # export's job is not backup's duplicate
    assert backed_up.id != exported.id
    with pytest.raises(DuplicateJob) as duplicate:
        await backup.aenqueue()
    assert duplicate.value.job_id == backed_up.id


async def test_a_debounce_never_takes_the_key_of_a_running_send_once_job(
    app: skiplock.App,
) -> None:
    """The mail must go out once: a debounced reindex of the same user, enqueued while the
    mail is being sent, must not free the mail's key (on the old rule it did, and the next
    enqueue of the mail wrote and sent a second one)."""
    sent: list[int] = []
    sending, may_finish = asyncio.Event(), asyncio.Event()

    @app.task(
        name="welcome_mail",
        unique_key=lambda user: f"user:{user}",
        unique_while="live_or_succeeded",
    )
    async def welcome_mail(user: int) -> None:
        sending.set()
        await may_finish.wait()
        sent.append(user)

    @app.task(name="reindex_user", unique_key=lambda user: f"user:{user}", debounce=3600)
    async def reindex_user(user: int) -> None: ...

    mail = await welcome_mail.aenqueue(7)
    async with running(app, concurrency=1):
        try:
            await asyncio.wait_for(sending.wait(), 30)
            reindex = await reindex_user.aenqueue(7)
            assert reindex.id != mail.id
            assert (await mail.fetch()).unique_key == "user:7"  # the running mail kept it
        finally:
            may_finish.set()
        await mail.result(timeout=30)
    assert (await welcome_mail.aenqueue(7)).id == mail.id  # sent once: the key is held
    await app.drain()
    assert sent == [7]
    assert (await reindex.fetch()).state == skiplock.JobState.PENDING  # waits out its window


async def test_tasks_that_share_a_key_space_hold_a_key_for_each_other(
    app: skiplock.App,
) -> None:
    ran: list[tuple[str, str]] = []

    def notify(name: str, **options: Any) -> Any:
        @app.task(name=name, unique_key=lambda user, text: f"notify:{user}", **options)
        async def send(user: int, text: str) -> None:
            ran.append((name, text))

        return send

    sms = notify("sms", unique_scope="shared")
    email = notify("email", unique_scope="shared")
    push = notify("push")  # the task's own key space: "notify:7" is another key here

    first = await sms.aenqueue(7, "sms")
    assert (await email.aenqueue(7, "email")).id == first.id  # keep: the holder's handle
    with pytest.raises(DuplicateJob) as duplicate:
        await email.using(on_conflict="reject").aenqueue(7, "email")
    assert duplicate.value.job_id == first.id
    kept = await email.using(on_conflict="replace").aenqueue(7, "email, replaced")
    assert kept.id == first.id  # another task's job is kept, never rewritten
    assert (await first.fetch()).args == [7, "sms"] and (await first.fetch()).task == "sms"
    own = await push.aenqueue(7, "push")
    assert own.id != first.id
    mine = await email.aenqueue(8, "email 8")
    assert (await email.using(on_conflict="replace").aenqueue(8, "email 8, new")).id == mine.id
    assert (await sms.aenqueue(8, "sms 8")).id == mine.id
    await app.drain()
    assert sorted(ran) == [("email", "email 8, new"), ("push", "push"), ("sms", "sms")]


async def test_a_shared_debounce_keeps_another_tasks_running_job_and_its_key(
    app: skiplock.App,
) -> None:
    sent: list[int] = []
    sending, may_finish = asyncio.Event(), asyncio.Event()

    @app.task(
        name="welcome_mail",
        unique_key=lambda user: f"user:{user}",
        unique_while="live_or_succeeded",
        unique_scope="shared",
    )
    async def welcome_mail(user: int) -> None:
        sending.set()
        await may_finish.wait()
        sent.append(user)

    @app.task(
        name="welcome_sms",
        unique_key=lambda user: f"user:{user}",
        debounce=3600,
        unique_scope="shared",
    )
    async def welcome_sms(user: int) -> None: ...

    mail = await welcome_mail.aenqueue(7)
    async with running(app, concurrency=1):
        try:
            await asyncio.wait_for(sending.wait(), 30)
            assert (await welcome_sms.aenqueue(7)).id == mail.id  # the shared key: the mail's
            assert (await mail.fetch()).unique_key == "user:7"
        finally:
            may_finish.set()
        await mail.result(timeout=30)
    assert (await welcome_mail.aenqueue(7)).id == mail.id
    assert (await welcome_sms.aenqueue(7)).id == mail.id  # succeeded, kept: still the holder
    await app.drain()
    assert sent == [7]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unique_key": "k", "unique_scope": "global"}, "unique_scope='global': must be 'task'"),
        ({"unique_scope": "shared"}, "unique_scope='shared': is where a unique key is unique"),
    ],
)
async def test_a_scope_is_checked_where_it_is_given(
    app: skiplock.App, options: dict[str, Any], message: str
) -> None:
    @app.task
    async def sync(n: int) -> None: ...

    with pytest.raises(ConfigurationError, match=message):
        sync.using(**options)
    with pytest.raises(ConfigurationError, match=message):
        app.task(name="other", **options)(sync.fn)
