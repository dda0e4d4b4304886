"""Refused POSTs through the App, on both databases: the anonymous viewer's are never stored,
a signed-in person's under a per-minute cap, and a form is read within explicit limits
(test_floods.py runs the same attacks from a browser and a raw socket)."""

from __future__ import annotations

import skiplock
from skiplock.dashboard import basic_auth, create_app, hash_password
from skiplock.dashboard.actions import MAX_FORM_BYTES, MAX_FORM_FIELDS
from skiplock.dashboard.audit import REFUSALS_STORED_PER_MINUTE

from .test_security import credentials, form_token, serving

PEOPLE = {"vera": "viewer", "otto": "operator"}


async def test_anonymous_refusals_are_never_stored_and_signed_in_ones_are_capped(
    app: skiplock.App,
) -> None:
    async with serving(create_app(app)) as client:  # the default: no sign-in
        for n in range(50):
            foreign = await client.post(
                "/queues/ledger/pause", headers={"Origin": "http://evil.example"}, data={"n": n}
            )
            assert foreign.status_code == 403
            same = await client.post("/queues/ledger/pause", data={"csrf": "x"})
            assert same.status_code == 403
    assert await app.audit_trail(limit=1000) == []
    users = {n: (r, hash_password(n[::-1])) for n, r in PEOPLE.items()}
    async with serving(create_app(app, auth=basic_auth(users))) as client:
        otto = credentials("otto", "otto")
        for _ in range(REFUSALS_STORED_PER_MINUTE + 25):
            forged = await client.post("/queues/ledger/pause", headers=otto, data={"csrf": "x"})
            assert forged.status_code == 403
    trail = await app.audit_trail(limit=1000)
    assert len(trail) == REFUSALS_STORED_PER_MINUTE
    assert {(e.who, e.what) for e in trail} == {("otto via dashboard", "refused pause queue")}


async def test_a_form_is_read_within_its_limits(app: skiplock.App) -> None:
    @app.task(name="ledgered", queue="ledger")
    async def ledgered() -> None: ...

    await ledgered.aenqueue()  # the queue has a page, and the page its forms
    users = {"otto": ("operator", hash_password("otto"))}
    async with serving(create_app(app, auth=basic_auth(users))) as client:
        otto = credentials("otto", "otto")
        token = await form_token(client, otto)
        many = "&".join([f"csrf={token}"] + [f"f{i}=1" for i in range(MAX_FORM_FIELDS + 1)])
        answer = await client.post(
            "/queues/ledger/pause",
            headers={**otto, "Content-Type": "application/x-www-form-urlencoded"},
            content=many,
        )
        assert answer.status_code == 413 and "Too many fields" in answer.text
        big = f"csrf={token}&payload=" + "a" * MAX_FORM_BYTES
        answer = await client.post(
            "/queues/ledger/pause",
            headers={**otto, "Content-Type": "application/x-www-form-urlencoded"},
            content=big,
        )
        assert answer.status_code == 413 and f"at most {MAX_FORM_BYTES}" in answer.text
        fine = await client.post("/queues/ledger/pause", headers=otto, data={"csrf": token})
        assert fine.status_code == 303
    assert (await app.queue_info("ledger")).paused
