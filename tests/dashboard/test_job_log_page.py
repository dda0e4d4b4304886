"""The job page shows a job's own log (issue 47, ``job_log=True``) to the roles that may read
its arguments, and hides it from a viewer (a log may quote the arguments), on both databases,
through the dashboard's real app over HTTP."""

from __future__ import annotations

import logging

import skiplock
from skiplock import Worker
from skiplock.dashboard import basic_auth, create_app, hash_password

from .conftest import credentials, serving

SECRET = "acct_do_not_show_7731"
log = logging.getLogger("tests.dashboard.job_log")
log.setLevel(logging.DEBUG)


async def test_the_job_page_shows_the_log_to_an_operator_and_hides_it_from_a_viewer(
    app: skiplock.App,
) -> None:
    @app.task(name="sync_account", job_log=True, job_log_bytes=512)
    async def sync_account(account: str) -> None:
        for i in range(20):
            log.info("step %d of %s", i, account)
        log.warning("done with %s", account)

    @app.task(name="plain")
    async def plain() -> None:
        log.warning("not kept")

    handle = await sync_account.aenqueue(SECRET)
    other = await plain.aenqueue()
    await Worker(app, poll_interval_s=0.05).run(burst=True)
    (kept,) = await app.job_logs(handle.id)
    users = {"vera": ("viewer", hash_password("arev")), "otto": ("operator", hash_password("otto"))}
    viewer, operator = credentials("vera", "arev"), credentials("otto", "otto")
    async with serving(create_app(app, auth=basic_auth(users))) as client:
        seen = await client.get(f"/jobs/{handle.id}", headers=viewer)
        assert seen.status_code == 200
        assert SECRET not in seen.text and "logs-hidden" in seen.text
        assert "done with" not in seen.text
        page = await client.get(f"/jobs/{handle.id}", headers=operator)
        assert page.status_code == 200
        assert f"WARNING  tests.dashboard.job_log: done with {SECRET}" in page.text
        said = (
            f"{len(kept.lines)} lines · {kept.cut_lines} earlier lines ({kept.cut_bytes} bytes) cut"
        )
        assert said in page.text
        bare = await client.get(f"/jobs/{other.id}", headers=operator)
        assert bare.status_code == 200 and "<h2>Log</h2>" not in bare.text
