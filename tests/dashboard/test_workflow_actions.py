"""Issue 26's dashboard without a browser (httpx calling the ASGI app), on both databases: the
``waiting`` state wherever the dashboard lists states, the Waiting page, a job's Workflow
section and graph, and the Send signal action under the role, CSRF, Origin and audit rules
every action follows; the graph's layout as a function."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

import skiplock
from skiplock import JobState
from skiplock._workflow_records import GraphNode, WorkflowGraph
from skiplock.dashboard import Role, User, basic_auth, create_app, hash_password
from skiplock.dashboard import pages as dashboard_pages
from skiplock.dashboard.graph import draw, layers

from ..helpers import FakeClock

PEOPLE = {"vera": "viewer", "otto": "operator", "ada": "admin"}
"""Each one's password is the name reversed."""


def basic(name: str) -> dict[str, str]:
    token = base64.b64encode(f"{name}:{name[::-1]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


VIEWER, OPERATOR = basic("vera"), basic("otto")


def dashboard(app: skiplock.App) -> Any:
    users = {n: (r, hash_password(n[::-1])) for n, r in PEOPLE.items()}
    return create_app(app, auth=basic_auth(users))


@pytest.fixture
async def client(app: skiplock.App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=dashboard(app), client=("127.0.0.1", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://dash.local") as the_client:
        yield the_client


async def csrf(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    page = (await client.get("/", headers=headers)).text
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "no form on the page"
    return found.group(1)


def parker(app: skiplock.App, timeout: float = 3600) -> Any:
    @app.task(name="approve", queue="flows")
    async def approve() -> Any:
        return await skiplock.current_job().wait_for("approved", timeout=timeout)

    return approve


def stepper(app: skiplock.App) -> Any:
    @app.task(name="step", queue="flows")
    async def step(n: int) -> int:
        return n

    return step


async def notice_of(client: httpx.AsyncClient, answer: httpx.Response) -> str:
    """The notice the page an action redirected to shows."""
    assert answer.status_code == 303, (answer.status_code, answer.text)
    page = await client.get(answer.headers["location"], headers=OPERATOR)
    found = re.search(r'<p class="notice" role="status">([^<]*)</p>', page.text)
    assert found, page.text[-1000:]
    return html.unescape(found.group(1))


# -- the signal action ---------------------------------------------------------------------------


async def test_send_signal_is_an_operator_action_with_its_token_and_is_audited(
    app: skiplock.App, client: httpx.AsyncClient
) -> None:
    handle = await parker(app).aenqueue()
    await app.drain()
    assert (await app.get_job(handle.id)).state is JobState.WAITING
    path = f"/jobs/{handle.id}/signal"

    async def still_parked() -> bool:
        return [(w.id, w.signal) for w in await app.waiting_jobs()] == [(handle.id, "approved")]

    # a viewer sees the parked job and its signal, and no form
    page = await client.get("/waiting", headers=VIEWER)
    assert page.status_code == 200
    assert f'<tr data-job="{handle.id}">' in page.text
    assert "<code data-signal>approved</code>" in page.text
    assert 'name="csrf"' not in page.text and path not in page.text
    # and a viewer holding a valid token of their own (no page gives one) is refused by role
    own = client._transport.app.state.dashboard.csrf.token(User("vera", Role.VIEWER))  # type: ignore[attr-defined]
    refused = await client.post(path, headers=VIEWER, data={"csrf": own, "name": "approved"})
    assert refused.status_code == 403
    assert refused.text == "Refused: this needs the operator role; vera is viewer."
    # an operator's page has the form, prefilled with the signal's name
    page = await client.get("/waiting", headers=OPERATOR)
    assert f'action="http://dash.local{path}"' in page.text
    assert 'name="name" value="approved"' in page.text
    token = await csrf(client, OPERATOR)
    forged = await client.post(path, headers=OPERATOR, data={"csrf": "0" * 64, "name": "approved"})
    assert forged.status_code == 403 and "CSRF token" in forged.text
    missing = await client.post(path, headers=OPERATOR, data={"name": "approved"})
    assert missing.status_code == 403 and "CSRF token" in missing.text
    elsewhere = await client.post(
        path,
        headers={**OPERATOR, "Origin": "http://evil.example"},
        data={"csrf": token, "name": "approved"},
    )
    assert elsewhere.status_code == 403 and "http://evil.example" in elsewhere.text
    # a payload that is not (strict) JSON, or no name, is one line and sends nothing
    for payload, said in (
        ("{oops", "Refused: payload: not JSON (Expecting property name enclosed in double quotes"),
        ("NaN", "Refused: payload: not strict JSON (NaN is not a JSON number)"),
        ("[" * 100_000, "Refused: payload: not strict JSON (nested too deep)"),
    ):
        bad = await client.post(
            path, headers=OPERATOR, data={"csrf": token, "name": "approved", "payload": payload}
        )
        assert bad.status_code == 400, bad.text
        assert bad.text.startswith(said), bad.text
        assert "\n" not in bad.text and "Traceback" not in bad.text
    unnamed = await client.post(path, headers=OPERATOR, data={"csrf": token, "name": " "})
    assert unnamed.status_code == 400 and unnamed.text.startswith("Refused: name:")
    assert await still_parked()
    # sent: delivered, and the job runs again with the payload; a second send is kept for a
    # next wait (the job waits for no signal now)
    form = {"csrf": token, "name": "approved", "payload": '{"by": "otto", "n": [1, 2]}'}
    sent = await client.post(path, headers=OPERATOR, data={**form, "back": "waiting"})
    assert sent.headers["location"].startswith("http://dash.local/waiting?")
    assert await notice_of(client, sent) == (
        f"Signal approved to job {handle.id}: delivered; the job is now pending."
    )
    assert await app.waiting_jobs() == []
    again = await client.post(path, headers=OPERATOR, data={**form, "back": "job"})
    assert again.headers["location"].startswith(f"http://dash.local/jobs/{handle.id}?")
    assert await notice_of(client, again) == (
        f"Signal approved to job {handle.id}: kept: job {handle.id} waits for no signal now; "
        "its next wait_for('approved') takes it."
    )
    await app.drain()
    assert await (await app.job(handle.id)).result(timeout=5) == {"by": "otto", "n": [1, 2]}
    finished = await client.post(
        path, headers=OPERATOR, data={"csrf": token, "name": "other", "back": "https://evil"}
    )
    assert finished.headers["location"].startswith(f"http://dash.local/jobs/{handle.id}?")
    assert await notice_of(client, finished) == (
        f"Signal other to job {handle.id}: not kept: job {handle.id} has finished."
    )
    nobody = await client.post(
        "/jobs/999999/signal", headers=OPERATOR, data={"csrf": token, "name": "approved"}
    )
    assert nobody.status_code == 400 and nobody.text.startswith("Refused: ")
    trail = [(e.who, e.what, e.target, e.detail) for e in reversed(await app.audit_trail())]
    assert trail == [
        ("vera via dashboard", "refused send signal", path, "needs the operator role"),
        ("otto via dashboard", "refused send signal", path, "CSRF token missing or wrong"),
        ("otto via dashboard", "refused send signal", path, "CSRF token missing or wrong"),
        ("otto via dashboard", "refused send signal", path, trail[3][3]),  # the Origin
        ("otto via dashboard", "refused send signal", path, trail[4][3]),  # {oops
        ("otto via dashboard", "refused send signal", path, trail[5][3]),  # NaN
        ("otto via dashboard", "refused send signal", path, trail[6][3]),  # nested
        ("otto via dashboard", "refused send signal", path, trail[7][3]),  # no name
        ("otto via dashboard", "signal", f"job {handle.id}", "approved: delivered"),
        ("otto via dashboard", "signal", f"job {handle.id}", "approved: kept"),
        ("otto via dashboard", "signal", f"job {handle.id}", "other: finished"),
        ("otto via dashboard", "refused send signal", "/jobs/999999/signal", trail[11][3]),
    ]
    assert "evil.example" in trail[3][3]
    assert [t[3].split(":")[0] for t in trail[4:8]] == ["payload"] * 3 + ["name"]


async def test_a_signal_after_the_wait_timed_out_is_kept_for_a_next_wait(
    db_url: str, clock: FakeClock
) -> None:
    app = skiplock.App(db_url, clock=clock)
    await app.migrate()
    try:
        handle = await parker(app, timeout=30).aenqueue()
        await app.drain()
        page_app = dashboard(app)
        transport = httpx.ASGITransport(app=page_app, client=("127.0.0.1", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://dash.local") as client:
            page = await client.get("/waiting", headers=VIEWER)
            until = (await app.waiting_jobs())[0].until
            assert until is not None and until.strftime("%Y-%m-%d %H:%M:%S") in page.text
            clock.advance(31)
            backend = await app.backend()
            assert (await backend.workflow_sweep()).timed_out == [handle.id]
            sent = await client.post(
                f"/jobs/{handle.id}/signal",
                headers=OPERATOR,
                data={"csrf": await csrf(client, OPERATOR), "name": "approved"},
            )
            assert await notice_of(client, sent) == (
                f"Signal approved to job {handle.id}: kept: job {handle.id} waits for no "
                "signal now; its next wait_for('approved') takes it."
            )
    finally:
        await app.close()


# -- the waiting state in every list; cancelling a waiting job --------------------------------


async def test_waiting_jobs_are_listed_counted_and_cancellable(
    app: skiplock.App, client: httpx.AsyncClient
) -> None:
    step = stepper(app)
    later = await step.using(run_after=timedelta(hours=1)).aenqueue(1)
    child = await step.using(depends_on=[later]).aenqueue(2)
    grandchild = await step.using(depends_on=[child]).aenqueue(3)
    overview = (await client.get("/", headers=VIEWER)).text
    assert re.search(r'data-total="waiting">2<', overview), overview
    jobs = (await client.get("/jobs?state=waiting", headers=VIEWER)).text
    assert '<option value="waiting" selected>' in jobs
    assert re.search(r'data-state-count="waiting">2<', jobs)
    assert re.findall(r'<tr data-job="(\d+)">', jobs) == [str(grandchild.id), str(child.id)]
    waiting = (await client.get("/waiting", headers=VIEWER)).text
    rows = re.findall(r'<tr data-job="(\d+)">.*?<td data-waits-for>([^<]*)</td>', waiting, re.S)
    assert rows == [(str(child.id), "1 parent left"), (str(grandchild.id), "1 parent left")]
    # the job page offers Cancel on a waiting job, and the ticked-jobs preview counts it
    page = (await client.get(f"/jobs/{child.id}", headers=OPERATOR)).text
    assert f'action="http://dash.local/jobs/{child.id}/cancel"' in page
    assert "Its waiting children follow their on_parent_failure." in page
    preview = await client.get(
        f"/selected?action=cancel&ids={grandchild.id}&ids={later.id}", headers=OPERATOR
    )
    assert re.search(r"data-preview-count>2<", preview.text)
    token = await csrf(client, OPERATOR)
    done = await client.post(f"/jobs/{child.id}/cancel", headers=OPERATOR, data={"csrf": token})
    assert await notice_of(client, done) == "Cancel asked; the job is now cancelled."
    assert (await app.get_job(child.id)).state is JobState.CANCELLED
    assert (await app.get_job(grandchild.id)).state is JobState.CANCELLED  # its policy
    assert (await app.get_job(later.id)).audit == []
    empty = (await client.get("/waiting", headers=VIEWER)).text
    assert "No job is waiting." in empty


# -- a job's Workflow section and graph -----------------------------------------------------------


def node_ids(page: str) -> list[int]:
    return sorted(int(i) for i in re.findall(r'data-node="(\d+)"', page))


async def test_the_job_page_draws_the_workflow_live_until_it_ends(
    app: skiplock.App, client: httpx.AsyncClient
) -> None:
    step = stepper(app)
    a = await step.aenqueue(1)
    b = await step.using(depends_on=[a], on_parent_failure="run").aenqueue(2)
    c = await step.using(depends_on=[a, b]).aenqueue(3)
    alone = await step.aenqueue(4)
    page = (await client.get(f"/jobs/{c.id}", headers=VIEWER)).text
    assert "<h2>Workflow</h2>" in page and 'data-refresh="5.0"' in page
    assert re.search(r"<dd data-waits-for>2 parents left</dd>", page)
    parents = re.findall(
        r'data-linked="(\d+)"><a href="[^"]+">#\d+</a> <span class="pill state-(\w+)"', page
    )
    assert parents == [(str(a.id), "pending"), (str(b.id), "waiting")]
    assert node_ids(page) == sorted([a.id, b.id, c.id])
    edges = sorted(re.findall(r'data-edge="(\d+-\d+)"', page))
    assert edges == sorted([f"{a.id}-{b.id}", f"{a.id}-{c.id}", f"{b.id}-{c.id}"])
    classes = {n: cls for cls, n in re.findall(r'class="node ([\w\- ]+)" data-node="(\d+)"', page)}
    assert classes == {
        str(a.id): "state-pending",
        str(b.id): "state-waiting",
        str(c.id): "state-waiting current",
    }
    x = {int(n): int(v) for n, v in re.findall(r'data-node="(\d+)" data-x="(\d+)"', page)}
    assert x[a.id] < x[b.id] < x[c.id]  # c is two steps from a (through b), not one
    b_page = (await client.get(f"/jobs/{b.id}", headers=VIEWER)).text
    assert "on failure: run" in b_page and f'data-linked="{c.id}"' in b_page
    # a job without links has no Workflow section, and a finished one no refresh
    await app.drain()
    lone = (await client.get(f"/jobs/{alone.id}", headers=VIEWER)).text
    assert "<h2>Workflow</h2>" not in lone and "data-refresh" not in lone
    done = (await client.get(f"/jobs/{a.id}", headers=VIEWER)).text
    assert "data-refresh" not in done  # every job drawn has finished
    assert done.count('class="node state-succeeded') == 3
    assert "data-waits-for" not in done


async def test_a_job_whose_workflow_is_still_running_stays_live(
    app: skiplock.App, client: httpx.AsyncClient
) -> None:
    step = stepper(app)
    a = await step.aenqueue(1)
    await app.drain()
    await step.using(depends_on=[a]).aenqueue(2)
    page = (await client.get(f"/jobs/{a.id}", headers=VIEWER)).text
    assert '<span class="pill state-succeeded">succeeded</span>' in page
    assert 'data-refresh="5.0"' in page  # finished, but its child may still change


async def test_a_graph_past_its_cap_says_it_stops_there(
    app: skiplock.App, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard_pages, "GRAPH_MOST", 3)
    step = stepper(app)
    chain = [await step.aenqueue(0)]
    for n in range(1, 6):
        chain.append(await step.using(depends_on=[chain[-1]]).aenqueue(n))
    first = (await client.get(f"/jobs/{chain[0].id}", headers=VIEWER)).text
    assert len(node_ids(first)) == 3 and chain[0].id in node_ids(first)
    assert '<p class="hint" data-truncated>' in first
    assert "it stops at 3" in first and "this job is not among them" not in first
    last = (await client.get(f"/jobs/{chain[-1].id}", headers=VIEWER)).text
    assert len(node_ids(last)) == 3 and "data-truncated" in last
    # the page says so whenever the job itself is left out of the graph it was asked for
    drawn = chain[-1].id in node_ids(last)
    assert ("this job is not among them" in last) is (not drawn)
    short = (await client.get(f"/jobs/{chain[2].id}", headers=VIEWER)).text
    assert "data-truncated" in short


async def test_a_chord_body_of_ten_thousand_parents_has_a_bounded_page_and_a_list_of_them(
    app: skiplock.App, client: httpx.AsyncClient
) -> None:
    """Its page lists the first 100 parents, counts all 10,000 by state and links to the
    list of them, a page of 200 at a time (it listed all 10,000: a 2.5 MB page)."""
    step = stepper(app)

    @app.task(name="gather", queue="flows")
    async def gather(values: list[int]) -> int:
        return len(values)

    handle = await skiplock.chord([step.s(n) for n in range(10_000)], gather.s()).aenqueue()
    members, body = handle.ids[:-1], handle.ids[-1]
    answer = await client.get(f"/jobs/{body}", headers=VIEWER)
    assert answer.status_code == 200
    assert len(answer.content) < 120_000, len(answer.content)  # 2.5 MB, all listed
    page = answer.text
    listed = re.findall(r'<li data-linked="(\d+)"', page)
    assert [int(i) for i in listed] == members[:100]
    assert "10000 parents:" in page
    assert '<span class="pill state-pending" data-state-count="pending">10000 pending' in page
    assert f'href="http://dash.local/jobs/{body}/parents">all 10000 parents</a>' in page
    # the list: 200 a page, by id, each page linking to the next
    seen: list[int] = []
    path = f"/jobs/{body}/parents"
    while path:
        answer = await client.get(path, headers=VIEWER)
        assert answer.status_code == 200 and len(answer.content) < 120_000
        rows = [int(i) for i in re.findall(r'<tr data-linked="(\d+)"', answer.text)]
        assert 0 < len(rows) <= 200
        seen += rows
        nexts = r'href="http://dash.local(/jobs/\d+/parents\?after=\d+)" rel="next"'
        found = re.search(nexts, answer.text)
        path = found.group(1) if found else ""
        if len(seen) >= 600 and path:  # three pages say it; jump to the last one
            path = f"/jobs/{body}/parents?after={members[-2]}"
            seen = members[: members.index(members[-2]) + 1]
    assert seen == members
    assert '10000 parents: <span class="pill state-pending"' in answer.text
    # a member's children: the body; a bad page is a 404, not a traceback
    children = (await client.get(f"/jobs/{members[0]}/children", headers=VIEWER)).text
    assert re.findall(r'<tr data-linked="(\d+)"', children) == [str(body)]
    assert (await client.get(f"/jobs/{body}/parents?after=x", headers=VIEWER)).status_code == 404
    assert (await client.get(f"/jobs/{body}/siblings", headers=VIEWER)).status_code == 404


async def test_a_retried_cancelled_link_waits_and_one_without_its_input_is_refused(
    app: skiplock.App, client: httpx.AsyncClient
) -> None:
    """The Retry button on a chain's link a person cancelled before its parent ran: it
    waits for its parent again (the notice says so); on a link whose parent died: refused,
    one line naming the parent, nothing changed."""

    @app.task(name="first", queue="flows")
    async def first() -> int:
        return 1

    @app.task(name="then", queue="flows")
    async def then(x: int) -> int:
        return x + 1

    @app.task(name="doomed", queue="flows", max_attempts=1)
    async def doomed() -> int:
        raise RuntimeError("down")

    waiting = await skiplock.chain(first.s(), then.s()).aenqueue()
    link = waiting.ids[1]
    await app.cancel_job(link)
    token = await csrf(client, OPERATOR)
    retried = await client.post(f"/jobs/{link}/retry", headers=OPERATOR, data={"csrf": token})
    assert await notice_of(client, retried) == (
        "Retried: it waits for its parents again, and runs with their results."
    )
    assert (await app.get_job(link)).state is JobState.WAITING
    dead = await skiplock.chain(doomed.s(), then.s()).aenqueue()
    await app.drain(queues=["flows"])
    assert await waiting.result(timeout=10) == 2
    orphan = dead.ids[1]
    refused = await client.post(f"/jobs/{orphan}/retry", headers=OPERATOR, data={"csrf": token})
    assert refused.status_code == 400
    assert refused.text.startswith(f"Refused: job {orphan} was not retried: it never got")
    assert f"parent job {dead.ids[0]}, which ended dead" in refused.text
    assert "\n" not in refused.text
    assert (await app.get_job(orphan)).state is JobState.CANCELLED


# -- the layout ---------------------------------------------------------------------------------


def graph(edges: list[tuple[int, int]], *extra: int, truncated: bool = False) -> WorkflowGraph:
    ids = sorted({i for e in edges for i in e} | set(extra))
    return WorkflowGraph([GraphNode(i, "t", "pending") for i in ids], edges, truncated)


def test_layers_are_the_longest_path_from_a_root() -> None:
    # 1 -> 2 -> 3 -> 4 and 1 -> 4: 4 is three steps down, not one
    assert layers([1, 2, 3, 4], [(1, 2), (2, 3), (3, 4), (1, 4)]) == {1: 0, 2: 1, 3: 2, 4: 3}
    # two roots; an edge to a job not drawn is ignored
    assert layers([5, 6, 7], [(5, 7), (6, 7), (7, 99)]) == {5: 0, 6: 0, 7: 1}
    # a cycle (enqueue refuses one) ends after everything, never loops
    assert layers([1, 2, 3], [(1, 2), (2, 3), (3, 2)]) == {1: 0, 2: 2, 3: 2}


def test_the_drawing_points_every_edge_right_and_keeps_rows_by_parent() -> None:
    drawing = draw(graph([(1, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 6)]), 6)
    where = {b.id: (b.x, b.y) for b in drawing.boxes}
    for arrow in drawing.arrows:
        assert where[arrow.parent][0] < where[arrow.child][0]
    assert where[2][0] == where[3][0] and where[4][0] == where[5][0]
    assert (where[2][1] < where[3][1]) == (where[4][1] < where[5][1])  # no crossing
    assert where[1][1] == where[6][1]  # a one-job layer sits in the middle
    assert [b.current for b in drawing.boxes] == [False] * 5 + [True]
    assert drawing.current_drawn and drawing.live and not drawing.truncated
    assert max(b.x for b in drawing.boxes) + drawing.node_w <= drawing.width
    assert max(b.y for b in drawing.boxes) + drawing.node_h <= drawing.height
    lone = draw(graph([], 9), 8)
    assert not lone.current_drawn and [b.id for b in lone.boxes] == [9]
    long_name = WorkflowGraph([GraphNode(1, "x" * 40, "succeeded")], [], True)
    cut = draw(long_name, 1)
    assert cut.boxes[0].label == "x" * 21 + "…" and cut.truncated and not cut.live
