"""A dead-letter group's Requeue and Discard in a real browser, over real HTTP, against the
real ``skiplock dashboard`` command on both databases: the action reaches exactly the group it
was clicked on, as many jobs as its preview counted."""

from __future__ import annotations

import re
from typing import Any

import pytest

from skiplock import JobFilter, JobState

from ..backends.helpers import bury_many
from .conftest import Pages, Stack

pytestmark = pytest.mark.slow


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def group_row(page: Any, error: str) -> Any:
    exact = page.locator("td.err", has_text=re.compile(f"^{re.escape(error)}$"))
    return page.locator("tr[data-task='archived']", has=exact)


def dead_ids(stack: Stack) -> list[int]:
    jobs = stack.run(stack.app.list_jobs(JobState.DEAD, JobFilter(task="archived", limit=50)))
    return sorted(j.id for j in jobs)


def test_a_group_action_reaches_exactly_its_group(stack: Stack, pages: Pages) -> None:
    """Groups "boom 1" (2 jobs), "boom 10", "boom 11", "boom 12" and a multi-line message
    with a trailing space: each group's preview counts its own jobs only, and its action
    requeues or discards those and no other."""
    messages = ["boom 1", "boom 10", "boom 1", "boom 11", "boom 12", "two\nlines + 100% "]
    errors = [f"RuntimeError: {m}" for m in messages]

    async def bury() -> list[int]:
        return await bury_many(await stack.app.backend(), "archived", errors, queue="archive")

    ids = stack.run(bury())
    page = pages.as_user("otto")
    page.goto("/dead")
    group_row(page, "RuntimeError: boom 1").locator("td.num a").click()
    expect(page.locator("tr[data-job]")).to_have_count(2)
    shown = sorted(
        int(i)
        for i in page.locator("tr[data-job]").evaluate_all("rows => rows.map(r => r.dataset.job)")
    )
    assert shown == [ids[0], ids[2]]
    expect(page.locator("[data-state-count='dead']")).to_have_text("2")
    page.get_by_role("button", name="Filter").click()  # the form keeps the group
    expect(page.locator("[data-last-error]")).to_contain_text("RuntimeError: boom 1")
    expect(page.locator("tr[data-job]")).to_have_count(2)
    page.goto("/dead")
    group_row(page, "RuntimeError: boom 1").get_by_text("Requeue…").click()
    expect(page.locator("[data-preview-count]")).to_have_text("2")
    page.get_by_role("button", name="Requeue 2 jobs").click()
    expect(page.locator(".notice")).to_have_text("Requeued 2 dead jobs.")
    assert dead_ids(stack) == [ids[1], *ids[3:]]

    page.goto("/dead")
    page.locator("tr[data-task='archived']", has_text="two").get_by_text("Discard…").click()
    expect(page.locator("[data-preview-count]")).to_have_text("1")
    page.get_by_role("button", name="Discard 1 job").click()
    expect(page.locator(".notice")).to_have_text("Discarded 1 dead jobs.")
    assert dead_ids(stack) == [ids[1], ids[3], ids[4]]
    assert stack.run(stack.app.get_job(ids[5])).state is JobState.CANCELLED
