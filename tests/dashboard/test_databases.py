"""The dashboard over several databases (issue 46), its pages rendered through the ASGI app
(no browser): each row of the Overview's queues, the Jobs list, a job's page, the dead-letter
groups, Waiting, Schedules and Workers says which database it is in (a column only when the
App has several), and a job id of another database opens its page, read there. A
one-database App's pages have no such column."""

from __future__ import annotations

import base64
import re

import httpx
import pytest

import skiplock
from skiplock import Database
from skiplock._backends.params import JobInsertManyParams, WorkerBeatParams
from skiplock._lanes import ID_SPAN
from skiplock.dashboard import basic_auth, create_app, hash_password

from ..backends.helpers import bury_many, new_job

OPERATOR = {"Authorization": "Basic " + base64.b64encode(b"otto:otto!").decode()}


def rows(html: str, attribute: str) -> dict[str, str]:
    """Each table row's ``attribute`` value and the row's HTML (the last row of a value)."""
    found = re.findall(rf'<tr {attribute}="([^"]*)"(.*?)</tr>', html, re.S)
    return {value: body for value, body in found}


def client(app: skiplock.App) -> httpx.AsyncClient:
    auth = basic_auth({"otto": ("operator", hash_password("otto!"))})
    web = create_app(app, auth=auth, sample_every_s=3600)
    transport = httpx.ASGITransport(app=web, client=("127.0.0.1", 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://dash.local", headers=OPERATOR)


@pytest.fixture
def app(two_db_app: skiplock.App) -> skiplock.App:
    return two_db_app


async def insert(app: skiplock.App, database: str, queue: str, n: int = 1) -> list[int]:
    backend = await app.backend(database=database)
    jobs = [new_job("t", queue=queue) for _ in range(n)]
    return list(await backend.job_insert_many(JobInsertManyParams(jobs)))


async def test_every_page_says_which_database_a_row_is_in(app: skiplock.App) -> None:
    (own,) = await insert(app, "default", "own")
    far = await insert(app, "b", "far", 2)
    await insert(app, "b", "own")
    (dead,) = await bury_many(await app.backend(database="b"), "t", ["boom"], queue="graveyard")
    beat = WorkerBeatParams("far-w:1", "far-w", "h", 1, None, 1, 0, 0, None)
    await (await app.backend(database="b")).worker_beat(beat)
    async with client(app) as web:
        overview = (await web.get("/")).text
        listed = (await web.get("/jobs")).text
        page = (await web.get(f"/jobs/{far[0]}")).text
        groups = (await web.get("/dead")).text
        workers = (await web.get("/workers")).text
        missing = await web.get(f"/jobs/{far[1] + 1000}")
    assert "<th>database</th>" in overview
    queues = re.findall(r'<tr data-queue="([^"]*)" data-database="([^"]*)">', overview)
    # by name, a name's rows in the databases' order; "default" is task t's, whose jobs go
    # to the App's own database
    assert queues == [("default", "default"), ("far", "b"), ("own", "default"), ("own", "b")]
    far_row = overview.split('data-queue="far" data-database="b">', 1)[1].split("</tr>", 1)[0]
    assert re.search(r'data-count="pending">2<', far_row)
    jobs = rows(listed, "data-job")
    assert "<td data-database>b</td>" in jobs[str(far[0])]
    assert "<td data-database>default</td>" in jobs[str(own)]
    assert far[0] > ID_SPAN
    assert f"Job {far[0]}" in page and "<dd data-database>b</dd>" in page
    assert missing.status_code == 404
    assert re.search(r'<tr data-task="t" data-database="b">\s*<td>b</td>', groups)
    assert f"#{dead}" in groups
    assert "<td data-database>b</td>" in rows(workers, "data-worker")["far-w"]


async def test_one_database_has_no_database_column(pg_url: str) -> None:
    app = skiplock.App(pg_url)

    @app.task(name="t")
    async def t() -> None:
        pass

    try:
        await app.migrate()
        (job,) = await insert(app, "default", "own")
        await bury_many(await app.backend(), "t", ["boom"], queue="graveyard")
        async with client(app) as web:
            pages = [(await web.get(path)).text for path in ("/", "/jobs", f"/jobs/{job}")]
            pages += [(await web.get(path)).text for path in ("/dead", "/workers", "/waiting")]
    finally:
        await app.close()
    assert 'data-queue="own"' in pages[0] and f'data-job="{job}"' in pages[1]
    for html in pages:
        assert "database</th>" not in html and "data-database" not in html


async def test_a_dead_group_acts_on_its_own_database(app: skiplock.App) -> None:
    """Each database's group has its own Requeue…: its preview counts that database's jobs
    and its action takes those alone."""
    own = await bury_many(await app.backend(), "t", ["boom"], queue="graveyard")
    far = await bury_many(await app.backend(database="b"), "t", ["boom", "boom"], queue="gy")
    async with client(app) as web:
        groups = (await web.get("/dead")).text
        link = re.search(r'href="([^"]*action=requeue[^"]*database=b)"', groups)
        assert link is not None, groups
        preview = (await web.get(link.group(1).replace("&amp;", "&"))).text
        assert re.search(r"data-preview-count>2<", preview)
        assert "<b data-database>b</b>" in preview
        form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', preview))
        assert form["database"] == "b" and form["count"] == "2"
        done = await web.post("/dead/requeue", data=form, headers={"Origin": "http://dash.local"})
        assert done.status_code in (302, 303), done.text
        unknown = await web.get("/dead/confirm?action=requeue&task=t&database=c")
    assert unknown.status_code == 400 and "no such database" in unknown.text
    dead = await app.list_jobs(skiplock.JobState.DEAD, skiplock.JobFilter(task="t", limit=10))
    assert [j.id for j in dead] == own  # database b's two requeued, the App's own left dead
    assert {(await app.get_job(i)).state for i in far} == {skiplock.JobState.PENDING}


async def test_an_overview_row_pauses_its_own_database(app: skiplock.App) -> None:
    await insert(app, "default", "own")
    await insert(app, "b", "own")
    async with client(app) as web:
        overview = (await web.get("/")).text
        row = overview.split('data-queue="own" data-database="b">', 1)[1].split("</tr>", 1)[0]
        form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', row))
        assert form["database"] == "b"
        done = await web.post(
            "/queues/own/pause", data=form, headers={"Origin": "http://dash.local"}
        )
        assert done.status_code in (302, 303), done.text
        assert "notice=Paused+queue+own+in+database+b." in done.headers["location"]
    assert (await app.queue_info("own", database="b")).paused
    assert not (await app.queue_info("own")).paused  # the other row's database untouched


async def test_a_database_down_is_a_line_on_the_overview_the_others_shown(
    app: skiplock.App,
) -> None:
    await insert(app, "default", "own")
    down = "postgresql://postgres@127.0.0.1:1/nowhere"  # nothing listens on port 1
    half = skiplock.App(app.url, databases={"b": Database(down, number=1)})
    half.tasks.update(app.tasks)
    try:
        async with client(half) as web:
            answer = await web.get("/")
    finally:
        await half.close()
    assert answer.status_code == 200, answer.text[-800:]
    lines = re.findall(r"<p [^>]*data-database-down>([^<]*)</p>", answer.text)
    assert len(lines) == 1 and lines[0].startswith("database b: ")
    assert 'data-queue="own" data-database="default"' in answer.text
