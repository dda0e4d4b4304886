"""Issue 26's dashboard in a real browser (Chromium through Playwright) against the real
``skiplock dashboard`` command, on SQLite and PostgreSQL: a workflow's graph on a job's page,
live while it runs, and the Waiting page's Send signal, which resumes a parked job once.

No worker process serves the ``flows`` queue: the test drains it in process
(``app.drain``), so every state change happens at a line of the test."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from skiplock import JobState

from ..apps import dash_app
from .conftest import Pages, Stack, save

pytestmark = pytest.mark.slow


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def enqueue(stack: Stack, job: Any) -> int:
    [handle] = stack.run(stack.app.enqueue_many([job]))
    return int(handle.id)


def drain(stack: Stack) -> None:
    stack.run(stack.app.drain(queues=["flows"]))


def job(stack: Stack, job_id: int) -> Any:
    return stack.run(stack.app.get_job(job_id))


def test_a_workflow_is_drawn_as_a_graph_that_follows_its_run(
    stack: Stack, pages: Pages, shots: Path
) -> None:
    # a diamond: a, then b and c (both after a), then d (after both)
    a = enqueue(stack, dash_app.step.prepare(1))
    b = enqueue(stack, dash_app.step.using(depends_on=[a]).prepare(2))
    c = enqueue(stack, dash_app.step.using(depends_on=[a]).prepare(3))
    d = enqueue(stack, dash_app.step.using(depends_on=[b, c]).prepare(4))
    page = pages.as_user("vera")
    page.goto(f"/jobs/{d}")
    section = page.locator("[data-workflow]")
    expect(section.locator("[data-waits-for]")).to_have_text("2 parents left")
    expect(section.locator("[data-parents] [data-linked]")).to_have_count(2)
    expect(section.locator(f'[data-linked="{b}"] .pill')).to_have_text("waiting")
    graph = section.locator("svg.workflow-graph")
    nodes = graph.locator("a.node")
    expect(nodes).to_have_count(4)
    edges = graph.locator("path.edge").evaluate_all("paths => paths.map(p => p.dataset.edge)")
    assert sorted(edges) == sorted([f"{a}-{b}", f"{a}-{c}", f"{b}-{d}", f"{c}-{d}"])
    node = {i: graph.locator(f'a.node[data-node="{i}"]') for i in (a, b, c, d)}
    expect(node[a]).to_have_class(re.compile(r"\bstate-pending\b"))
    for i in (b, c, d):
        expect(node[i]).to_have_class(re.compile(r"\bstate-waiting\b"))
    expect(node[d]).to_have_class(re.compile(r"\bcurrent\b"))
    # in layers by the longest path from the root: a, then b and c side by side, then d
    x = {i: int(node[i].get_attribute("data-x") or -1) for i in node}
    assert x[a] < x[b] == x[c] < x[d]
    # each node is a link to its job
    assert node[b].get_attribute("href") == f"{stack.base}/jobs/{b}"
    save(page, shots, "workflow", stack)
    # live: the run moves the colours without a reload (the page refreshes every 0.5 s here)
    drain(stack)
    assert job(stack, d).state is JobState.SUCCEEDED
    for i in (a, b, c, d):
        expect(node[i]).to_have_class(re.compile(r"\bstate-succeeded\b"), timeout=15_000)
    expect(section.locator("[data-waits-for]")).to_have_count(0)
    # a parent's page shows its children, and the same graph around it
    page.goto(f"/jobs/{a}")
    children = page.locator("[data-children] [data-linked]")
    expect(children).to_have_count(2)
    expect(page.locator("svg.workflow-graph a.node")).to_have_count(4)
    expect(page.locator(f'svg.workflow-graph a.node[data-node="{a}"]')).to_have_class(
        re.compile(r"\bcurrent\b")
    )


def test_a_parked_job_is_sent_its_signal_once_from_the_waiting_page(
    stack: Stack, pages: Pages, shots: Path
) -> None:
    parked = enqueue(stack, dash_app.approve.prepare(7))
    drain(stack)  # it runs, asks for "approved" and parks
    assert job(stack, parked).state is JobState.WAITING
    viewer = pages.as_user("vera")
    viewer.goto("/waiting")
    row = viewer.locator(f'table.waiting tr[data-job="{parked}"]')
    expect(row.locator("[data-signal]")).to_have_text("approved")
    expect(row.locator("details.signal")).to_have_count(0)  # a viewer may not send it
    expect(viewer.locator('form[method="post"]')).to_have_count(0)
    # two operators have the page open; both unfold the form
    otto, ada = pages.as_user("otto"), pages.as_user("ada")
    for page in (otto, ada):
        page.goto("/waiting")
        page.locator(f'details[data-signal-job="{parked}"] summary').click()
        expect(page.locator(f'details[data-signal-job="{parked}"] input[name=name]')).to_have_value(
            "approved"
        )
    form = otto.locator(f'details[data-signal-job="{parked}"] form')
    form.locator("textarea[name=payload]").fill("{not json")
    form.get_by_role("button", name="Send signal").click()
    refused = otto.locator("body")
    expect(refused).to_contain_text("Refused: payload: not JSON")
    assert "Traceback" not in otto.content()
    assert job(stack, parked).state is JobState.WAITING  # nothing sent
    otto.go_back()
    otto.reload()
    otto.locator(f'details[data-signal-job="{parked}"] summary').click()
    form = otto.locator(f'details[data-signal-job="{parked}"] form')
    form.locator("textarea[name=payload]").fill('{"approved_by": "otto"}')
    save(otto, shots, "waiting", stack)
    form.get_by_role("button", name="Send signal").click()
    expect(otto.locator(".notice")).to_have_text(
        re.compile(rf"^Signal approved to job {parked}: delivered; the job is now pending\.$")
    )
    expect(otto.locator(f'tr[data-job="{parked}"]')).to_have_count(0)  # it left waiting
    assert job(stack, parked).state is JobState.PENDING
    drain(stack)
    record = job(stack, parked)
    assert record.state is JobState.SUCCEEDED
    assert record.result == {"approved_by": "otto"}
    # ada's page still holds the form (an unfolded form stops the refresh): her send comes
    # after the job finished, and is not kept
    ada.locator(f'details[data-signal-job="{parked}"] form').get_by_role(
        "button", name="Send signal"
    ).click()
    expect(ada.locator(".notice")).to_contain_text(
        f"Signal approved to job {parked}: not kept: job {parked} has finished"
    )
    assert job(stack, parked).result == {"approved_by": "otto"}
    trail = [
        (e.who, e.what, e.target, e.detail)
        for e in stack.run(stack.app.audit_trail(limit=20))
        if e.target in (f"job {parked}", f"/jobs/{parked}/signal")
    ]
    assert trail[:3] == [
        ("ada via dashboard", "signal", f"job {parked}", "approved: finished"),
        ("otto via dashboard", "signal", f"job {parked}", "approved: delivered"),
        ("otto via dashboard", "refused send signal", f"/jobs/{parked}/signal", trail[2][3]),
    ]
    assert trail[2][3].startswith("payload: not JSON")
