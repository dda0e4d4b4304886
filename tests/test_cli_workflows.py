"""``skiplock job show`` / ``signal`` / ``waiting`` / ``batch`` on workflows, through the real
CLI on SQLite and PostgreSQL: what they print, the documented ``--json`` keys, a signal that
resumes a parked job (a second one is kept for a next wait; one after the job finished exits
1), and a signal of a name the job does not wait for (exits 1 naming the one it does)."""

from __future__ import annotations

import pytest

import skiplock
from skiplock import JobState, chain

from .apps import cli_app
from .helpers import Cli, cli_fixtures, documented, keys, ok, parsed, run

pytestmark = pytest.mark.slow
APP = "tests.apps.cli_app:app"

cli, app = cli_fixtures(cli_app)


async def test_show_prints_a_jobs_links_and_json_has_the_documented_keys(
    cli: Cli, app: skiplock.App
) -> None:
    flow = await chain(cli_app.add.s(1, 2), cli_app.add_sync.s(3)).aenqueue()
    first, second = flow.ids
    text = ok(await run(cli, "job", "show", APP, str(second)))
    assert f"parents: {first} (pending); on_parent_failure=cancel" in text
    assert "waits for 1 more parent(s) to finish" in text
    text = ok(await run(cli, "job", "show", APP, str(first)))
    assert f"children: {second} (waiting)" in text
    shown = parsed(await run(cli, "job", "show", APP, str(second), "--json"))
    assert shown["state"] == "waiting"
    doc = {k.removeprefix("workflow.") for k in documented("`job show --json`'s")}
    assert set(shown["workflow"]) | {"workflow"} == doc
    assert shown["workflow"]["parents"] == [
        {"id": first, "state": "pending", "on_parent_failure": "cancel"}
    ]
    waiting = parsed(await run(cli, "job", "waiting", APP, "--json"))
    assert keys(waiting) | {f"jobs[].{k}" for k in waiting["jobs"][0]} == documented(
        "`job waiting --json`"
    )
    assert [(j["id"], j["parents_left"]) for j in waiting["jobs"]] == [(second, 1)]
    assert f"{second} add_sync queue=default waits for 1 parent(s) left" in ok(
        await run(cli, "job", "waiting", APP)
    )


async def test_a_signal_from_the_cli_resumes_a_parked_job_once(cli: Cli, app: skiplock.App) -> None:
    handle = await cli_app.approval.aenqueue()
    await skiplock.Worker(app, poll_interval_s=0.05).run(burst=True)
    assert (await app.get_job(handle.id)).state is JobState.WAITING
    listed = ok(await run(cli, "job", "waiting", APP))
    assert f"{handle.id} approval queue=default waits for signal 'approved' until" in listed
    bad = await run(cli, "job", "signal", APP, str(handle.id), "approved", "--payload", "{no")
    assert bad.returncode == 2 and "--payload is not JSON" in bad.stderr  # type: ignore[attr-defined]
    sent = await run(
        cli, "job", "signal", APP, str(handle.id), "approved", "--payload", '{"by": "ann"}'
    )
    assert ok(sent).strip() == f"job {handle.id}: signal 'approved' delivered"
    again = await run(cli, "job", "signal", APP, str(handle.id), "approved")
    assert ok(again).strip() == (  # pending now: kept for a next wait, as a queue would
        f"job {handle.id}: signal 'approved' kept: job {handle.id} waits for no signal now; "
        "its next wait_for('approved') takes it"
    )
    await skiplock.Worker(app, poll_interval_s=0.05).run(burst=True)
    assert await handle.result(timeout=10) == {"by": "ann"}
    late = await run(cli, "job", "signal", APP, str(handle.id), "approved")
    assert late.returncode == 1  # type: ignore[attr-defined]
    assert late.stderr.strip() == (  # type: ignore[attr-defined]
        f"Error: job {handle.id}: signal 'approved' not kept: job {handle.id} has finished"
    )
    trail = await app.audit_trail()
    assert [(e.what, e.detail) for e in trail[:3]] == [
        ("signal", "approved: finished"),
        ("signal", "approved: kept"),
        ("signal", "approved: delivered"),
    ]


async def test_a_signal_the_job_does_not_wait_for_says_so_and_exits_1(
    cli: Cli, app: skiplock.App
) -> None:
    """A person's likely typo: the job is parked on 'approved', the signal says 'aproved'."""
    handle = await cli_app.approval.aenqueue()
    await skiplock.Worker(app, poll_interval_s=0.05).run(burst=True)
    assert (await app.get_job(handle.id)).state is JobState.WAITING
    typo = await run(cli, "job", "signal", APP, str(handle.id), "aproved")
    assert typo.returncode == 1, (typo.stdout, typo.stderr)  # type: ignore[attr-defined]
    assert typo.stderr.strip() == (  # type: ignore[attr-defined]
        f"Error: job {handle.id}: signal 'aproved' kept, not awaited: job {handle.id} waits "
        "for 'approved', not 'aproved'"
    )
    assert (await app.get_job(handle.id)).state is JobState.WAITING  # still parked
    receipt = await app.signal(handle.id, "aproved")
    assert (receipt.outcome, receipt.waiting_for) == (skiplock.SignalOutcome.KEPT, "approved")
    assert receipt.mistaken and not receipt.awaited
    right = await run(cli, "job", "signal", APP, str(handle.id), "approved", "--payload", "1")
    assert ok(right).strip() == f"job {handle.id}: signal 'approved' delivered"
    await skiplock.Worker(app, poll_interval_s=0.05).run(burst=True)
    assert await handle.result(timeout=10) == 1


async def test_batch_prints_its_counts(cli: Cli, app: skiplock.App) -> None:
    async with app.batch(on_complete=cli_app.record.s()) as batch:
        await cli_app.add.aenqueue(1, 1)
        await cli_app.fail.aenqueue("no")
    await skiplock.Worker(app, poll_interval_s=0.05).run(burst=True)
    info = parsed(await run(cli, "job", "batch", APP, str(batch.id), "--json"))
    assert set(info) == documented("`job batch --json`")
    assert info["counts"] == {"succeeded": 1, "dead": 1} and info["finished"] == 2
    text = ok(await run(cli, "job", "batch", APP, str(batch.id)))
    assert f"batch {batch.id} closed: 2/2 finished dead=1 succeeded=1" in text
    missing = await run(cli, "job", "batch", APP, "999999")
    assert missing.returncode == 1 and "no such batch" in missing.stderr  # type: ignore[attr-defined]


async def test_retrying_a_cancelled_link_says_it_waits_and_a_link_without_input_is_refused(
    cli: Cli, app: skiplock.App
) -> None:
    """``job retry`` of a chain's link a person cancelled while its parent had not run says
    it waits for its parents again (it does not run); of a link whose parent died, one line
    naming the parent, exit 1, nothing changed."""
    flow = await chain(cli_app.add.s(1, 2), cli_app.add_sync.s(3)).aenqueue()
    _first, second = flow.ids
    ok(await run(cli, "job", "cancel", APP, str(second)))
    text = ok(await run(cli, "job", "retry", APP, str(second)))
    assert text == f"job {second} waits for its parents again (1 left)\n"
    assert (await app.get_job(second)).state is JobState.WAITING
    doomed = await chain(cli_app.fail.s("down"), cli_app.add_sync.s(3)).aenqueue()
    dead, link = doomed.ids
    await skiplock.Worker(app, poll_interval_s=0.05).run(burst=True)
    assert (await app.get_job(link)).state is JobState.CANCELLED
    refused = await run(cli, "job", "retry", APP, str(link))
    assert refused.returncode == 1  # type: ignore[attr-defined]
    lines = refused.stderr.splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and f"parent job {dead}, which ended dead" in lines[0], lines
    assert (await app.get_job(link)).state is JobState.CANCELLED
