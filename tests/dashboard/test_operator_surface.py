"""Issue 20's dashboard additions in a real browser (Chromium through Playwright) against the
real ``skiplock dashboard`` command and a real worker, on SQLite and PostgreSQL: live workers
on the Overview, per-state counts and search on Jobs, ticked jobs retried or cancelled through
an exact preview, schedules to the second, a port in use, the Origin refusal."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from skiplock import JobFilter, JobState
from skiplock._backends.params import ClaimParams
from skiplock._job import Completion, Disposition

from ..apps import dash_app
from .conftest import APP, ROOT, Pages, Stack, wait_until

pytestmark = pytest.mark.slow


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def enqueue(stack: Stack, jobs: list[Any]) -> list[int]:
    return [h.id for h in stack.run(stack.app.enqueue_many(jobs))]


def job(stack: Stack, job_id: int) -> Any:
    return stack.run(stack.app.get_job(job_id))


def test_live_workers_on_the_overview_red_while_ready_work_waits(
    stack: Stack, pages: Pages
) -> None:
    [waiting] = enqueue(stack, [dash_app.work.prepare(1)])
    page = pages.as_user("vera")
    page.goto("/")
    card = page.locator("[data-workers]")
    expect(card.locator('[data-total="workers"]')).to_have_text("0")
    expect(card).to_have_attribute("data-alert", "")
    expect(card).to_contain_text("1 ready job waiting and no worker to run it")
    expect(card.locator(".big")).to_have_class("big alert")
    stack.start_worker()
    # no reload: the live refresh brings the worker in, and the job it ran takes the alert away
    expect(card.locator('[data-total="workers"]')).to_have_text("1", timeout=30_000)
    wait_until(lambda: job(stack, waiting).state is JobState.SUCCEEDED, "the job to run")
    expect(page.locator("[data-workers][data-alert]")).to_have_count(0, timeout=30_000)
    expect(page.locator("[data-workers]")).to_contain_text("live worker")


def test_per_state_counts_and_search_by_id_key_and_correlation_id(
    stack: Stack, pages: Pages
) -> None:
    keyed = dash_app.archived.using(unique_key="order-77", correlation_id="req-9")
    [by_key, other] = enqueue(
        stack, [keyed.prepare(1), dash_app.archived.using(correlation_id="req-9").prepare(2)]
    )
    page = pages.as_user("vera")

    def steady_counts() -> dict[str, int]:
        """The page and the database agree while nothing moves (the worker's scheduler may
        enqueue a slot at a quarter hour): read before and after the page, until equal."""
        while True:
            before = stack.run(stack.app.count_jobs_by_state())
            page.goto("/jobs")
            if stack.run(stack.app.count_jobs_by_state()) == before:
                return before  # type: ignore[no-any-return]

    counts = steady_counts()
    for state in ("pending", "waiting", "running", "succeeded", "cancelled", "dead"):
        shown = page.locator(f'[data-state-count="{state}"]')
        expect(shown).to_have_text(str(counts.get(state, 0)))
    expect(page.locator('[data-state-count="all"]')).to_have_text(str(sum(counts.values())))
    page.goto("/jobs?queue=archive")  # the counts follow the filters
    archive = stack.run(stack.app.count_jobs_by_state(JobFilter(queue="archive")))
    expect(page.locator('[data-state-count="pending"]')).to_have_text(str(archive["pending"]))
    page.locator('[data-state-count="pending"]').click()  # a count is a link to its state
    expect(page.locator("select[name=state]")).to_have_value("pending")

    def found(text: str) -> list[int]:
        page.goto("/jobs")
        page.fill("input[name=find]", text)
        page.get_by_role("button", name="Find").click()
        page.wait_for_url("**/jobs?find=*")
        return [
            int(i)
            for i in page.locator("table.jobs tbody tr").evaluate_all(
                "rows => rows.map(r => r.dataset.job)"
            )
        ]

    assert found(str(other)) == [other]  # a viewer may look a job up by its id
    page = pages.as_user("otto")  # by a key made from arguments, only an operator
    assert found("order-77") == [by_key]
    assert found("req-9") == [other, by_key]
    assert found("order-7") == []  # exact, not a substring
    expect(page.locator("[data-found]")).to_contain_text("0 jobs")


def test_ticked_jobs_are_cancelled_and_retried_exactly(stack: Stack, pages: Pages) -> None:
    a, b, c = enqueue(stack, [dash_app.archived.prepare(n) for n in (10, 11, 12)])
    page = pages.as_user("otto")
    page.goto("/jobs?queue=archive")
    page.check(f'input[name=ids][value="{a}"]')
    page.check(f'input[name=ids][value="{c}"]')
    page.get_by_role("button", name="Cancel…").click()
    expect(page.locator("[data-preview-count]")).to_have_text("2")
    acted = page.locator("[data-acted]").evaluate_all("links => links.map(l => l.dataset.acted)")
    assert sorted(int(i) for i in acted) == sorted([a, c])
    page.get_by_role("button", name="Cancel 2 jobs").click()
    expect(page.locator(".notice")).to_have_text("Cancel asked for 2 of 2 selected jobs.")
    assert [job(stack, i).state for i in (a, b, c)] == [
        JobState.CANCELLED,
        JobState.PENDING,  # not ticked: untouched
        JobState.CANCELLED,
    ]
    # retry a (cancelled: finished) and b (pending: nothing to retry): the preview says so
    page.goto("/jobs?queue=archive")
    page.check(f'input[name=ids][value="{a}"]')
    page.check(f'input[name=ids][value="{b}"]')
    page.get_by_role("button", name="Retry…").click()
    expect(page.locator("[data-preview-count]")).to_have_text("1")
    expect(page.locator("[data-left]")).to_contain_text(f"#{b}")
    page.get_by_role("button", name="Retry 1 job").click()
    expect(page.locator(".notice")).to_have_text("Retried 1 of 1 selected jobs.")
    assert [job(stack, i).state for i in (a, b, c)] == [
        JobState.PENDING,
        JobState.PENDING,
        JobState.CANCELLED,
    ]
    assert job(stack, b).audit == []  # shown as left alone, and left alone
    assert [e["what"] for e in job(stack, a).audit] == ["cancel", "retry"]
    assert job(stack, a).audit[-1]["who"] == "otto via dashboard"
    # a viewer gets no boxes, and the preview refuses nothing ticked
    viewer = pages.as_user("vera")
    viewer.goto("/jobs?queue=archive")
    expect(viewer.locator("input[name=ids]")).to_have_count(0)
    viewer.goto("/selected?action=retry")
    expect(viewer.locator(".error")).to_contain_text("select at least one job")


def test_a_forged_selection_acts_on_no_more_than_it_names(stack: Stack, pages: Pages) -> None:
    """The POST acts on the ids it carries, never on a filter: a hand-made one naming a
    pending job for retry leaves it, and one naming two jobs touches only those two."""
    x, y, z = enqueue(stack, [dash_app.archived.prepare(n) for n in (20, 21, 22)])
    page = pages.as_user("otto")
    page.goto("/")  # the Overview's forms hold the operator's token
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    sent = page.request.post(
        "/selected/cancel", form={"csrf": csrf, "confirm": "yes", "ids": str(x)}
    )
    assert sent.ok
    assert [job(stack, i).state for i in (x, y, z)] == [
        JobState.CANCELLED,
        JobState.PENDING,
        JobState.PENDING,
    ]
    refused = page.request.post("/selected/cancel", form={"csrf": csrf, "ids": str(y)})
    assert refused.status == 400 and "Confirm" in refused.text()
    assert job(stack, y).state is JobState.PENDING


def test_schedules_show_seconds_when_the_schedule_has_them(stack: Stack, pages: Pages) -> None:
    page = pages.as_user("vera")
    page.goto("/schedules")
    yearly = page.locator("table.schedules tbody tr", has_text="yearly-at-30s")
    expect(yearly.locator("ul.fires li").first).to_contain_text("00:00:30")
    nightly = page.locator("table.schedules tbody tr", has_text="nightly-report")
    first = nightly.locator("ul.fires li").first.inner_text()
    assert first.count(":") == 1, first  # minutes only: the schedule has no seconds field


def test_the_origin_refusal_says_it_was_the_origin(stack: Stack, pages: Pages) -> None:
    [pending] = enqueue(stack, [dash_app.archived.prepare(30)])
    page = pages.as_user("ada")
    page.goto("/")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    refused = page.request.post(
        f"/jobs/{pending}/cancel",
        form={"csrf": csrf},
        headers={"Origin": "http://evil.example"},
    )
    assert refused.status == 403
    assert "Origin" in refused.text() and "http://evil.example" in refused.text()
    assert "CSRF" not in refused.text()  # the token was fine: the message does not blame it
    assert job(stack, pending).state is JobState.PENDING
    forged = page.request.post(f"/jobs/{pending}/cancel", form={"csrf": "forged"})
    assert forged.status == 403 and "CSRF token" in forged.text()


def test_a_port_in_use_is_one_error_line(stack: Stack) -> None:
    taken = subprocess.run(
        [sys.executable, "-m", "skiplock", "dashboard", APP, "--port", str(stack.port)],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert taken.returncode == 2, taken.stderr
    lines = taken.stderr.strip().splitlines()
    assert (
        lines[-1] == f"Error: --host 127.0.0.1 --port {stack.port}: cannot listen: already in use"
    )
    assert "Traceback" not in taken.stderr
    assert [line for line in lines if "rror" in line] == [lines[-1]]


def test_the_overview_lists_the_busiest_concurrency_keys(stack: Stack, pages: Pages) -> None:
    """Keys come from job arguments: shown as text (never markup), busiest first. (In a
    queue no worker of this module serves: the jobs stay where the page can count them.)"""
    hot = dash_app.work.using(queue="tenants", concurrency_key="<b>acct-1</b>", key_limit=2)
    cold = dash_app.work.using(queue="tenants", concurrency_key="acct-2")
    enqueue(stack, [hot.prepare(n) for n in range(3)] + [cold.prepare(9)])
    page = pages.as_user("otto")
    page.goto("/")
    rows = page.locator("table.keys tbody tr")
    expect(rows.nth(1)).to_be_visible()  # (another test's key may follow, never lead)
    first = rows.nth(0)
    expect(first.locator("th")).to_have_text("<b>acct-1</b>")  # the text, not a bold tag
    expect(first.locator('[data-count="pending"]')).to_have_text("3")
    expect(first.locator("td").last).to_have_text("2")
    expect(rows.nth(1).locator("th")).to_have_text("acct-2")
    expect(page.locator("table.keys b")).to_have_count(0)
    # a viewer sees the same rows under pseudonyms: keys are made from arguments
    viewer = pages.as_user("vera")
    viewer.goto("/")
    seen = viewer.locator("table.keys tbody tr")
    expect(seen.nth(0).locator('[data-count="pending"]')).to_have_text("3")
    expect(seen.nth(0).locator("th")).to_have_text(re.compile(r"^key [0-9a-f]{10}$"))
    expect(viewer.locator("table.keys")).not_to_contain_text("acct-")
    assert "acct-" not in viewer.content()


def test_the_overview_names_an_ordered_key_a_dead_job_holds(stack: Stack, pages: Pages) -> None:
    held = dash_app.work.using(queue="orders", ordering_key="order-5")  # no worker serves it
    first, _ = enqueue(stack, [held.prepare(1), held.prepare(2)])

    async def the_first_dies() -> None:  # as its worker would record it
        backend = await stack.app.backend()
        orders = ClaimParams(("orders",), 5, "w", "t", 60, 5)
        (claimed,) = await backend.job_get_available_keyed(orders)
        done = Completion(claimed.id, claimed.lease_token, Disposition.DEAD)
        await backend.job_set_state_if_running_many([done])

    stack.run(the_first_dies())
    page = pages.as_user("otto")
    page.goto("/")
    row = page.locator('table.blocked-keys tr[data-key="order-5"]')
    expect(row.locator('[data-count="waiting"]')).to_have_text("1")
    expect(row.locator("a")).to_have_text(f"#{first}")
    row.locator("a").click()
    expect(page).to_have_url(re.compile(rf"/jobs/{first}$"))
