"""The dashboard in a real browser (Debian's Chromium through Playwright), against the real
``skiplock dashboard`` command, a real database (SQLite and PostgreSQL) and a real worker
process. Sync tests: Playwright's sync API runs its own loop."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from skiplock import JobFilter, JobState
from skiplock._worker.scheduler import Scheduler

from ..apps import dash_app
from .conftest import Pages, Stack, save, wait_until

pytestmark = pytest.mark.slow


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def enqueue(stack: Stack, jobs: list[Any]) -> list[int]:
    handles = stack.run(stack.app.enqueue_many(jobs))
    return [h.id for h in handles]


def job_state(stack: Stack, job_id: int) -> JobState:
    return stack.run(stack.app.get_job(job_id)).state  # type: ignore[no-any-return]


def test_overview_shows_queued_jobs_draining(stack: Stack, pages: Pages, shots: Path) -> None:
    enqueue(stack, [dash_app.work.prepare(i, secret=f"s{i}") for i in range(60)])
    page = pages.as_user("otto")
    page.goto("/")
    pending = page.locator('tr[data-queue="work"] [data-count="pending"]')
    expect(pending).to_have_text("60")
    save(page, shots, "overview-queued", stack)
    stack.start_worker()
    workers = pages.as_user("vera")
    workers.goto("/workers")
    worker_row = workers.locator("table.workers tbody tr").first
    expect(worker_row).to_be_visible(timeout=30_000)  # the live refresh brings it in
    expect(worker_row.locator("td").nth(1)).to_have_text("work")
    expect(worker_row.locator("td").nth(2)).to_have_text("4")
    save(workers, shots, "workers", stack)
    # no reload: the page refreshes itself (every 0.5 s here) until the queue is empty
    expect(pending).to_have_text("0", timeout=60_000)
    expect(page.locator('tr[data-queue="work"] td.state-succeeded')).not_to_have_text("0")
    expect(page.locator('tr[data-queue="work"] td.throughput')).not_to_have_text("0/min")
    expect(page.locator('tr[data-queue="work"] svg.spark polyline')).to_be_visible()
    dark = pages.as_user("ada", dark=True)
    dark.goto("/")
    save(dark, shots, "overview-dark", stack)
    save(page, shots, "overview", stack)


def test_a_viewer_sees_no_payload_and_no_action(stack: Stack, pages: Pages, shots: Path) -> None:
    [job_id] = enqueue(stack, [dash_app.hostile.prepare()])
    [secret_id] = enqueue(stack, [dash_app.archived.using(priority=1).prepare(7)])
    viewer = pages.as_user("vera")
    viewer.goto(f"/jobs/{secret_id}")
    expect(viewer.locator("#payload-hidden")).to_be_visible()
    expect(viewer.get_by_text("Show arguments")).to_have_count(0)
    assert "[\n  7\n]" not in viewer.content()
    for path in ("/", "/dead", f"/jobs/{secret_id}", f"/jobs/{job_id}"):
        viewer.goto(path)
        expect(viewer.locator('form[method="post"]')).to_have_count(0)
        expect(viewer.locator("a.button")).to_have_count(0)
    operator = pages.as_user("otto")
    operator.goto(f"/jobs/{secret_id}")
    operator.get_by_text("Show arguments").click()
    expect(operator.locator("details.payload pre").first).to_contain_text("7")
    expect(operator.locator('form[method="post"]')).not_to_have_count(0)
    save(operator, shots, "job-operator", stack)
    # and nobody signed in is asked to sign in
    anonymous = pages.as_user(None)
    assert anonymous.request.get("/").status == 401


def test_an_operator_requeues_a_dead_job_and_the_worker_runs_it(
    stack: Stack, pages: Pages, shots: Path
) -> None:
    stack.start_worker()
    stack.flag.unlink(missing_ok=True)
    [job_id] = enqueue(stack, [dash_app.fragile.prepare(41)])
    wait_until(lambda: job_state(stack, job_id) is JobState.DEAD, "the job to die")
    page = pages.as_user("otto")
    page.goto("/dead")
    row = page.locator('tr[data-task="fragile"]')
    expect(row).to_contain_text("payment gateway unreachable")
    save(page, shots, "dead", stack)
    row.get_by_text("Requeue…").click()
    expect(page.locator("[data-preview-count]")).to_have_text("1")
    save(page, shots, "dead-confirm", stack)
    stack.flag.touch()  # the gateway is back
    page.get_by_role("button", name="Requeue 1 job").click()
    expect(page.locator(".notice")).to_have_text("Requeued 1 dead jobs.")
    wait_until(lambda: job_state(stack, job_id) is JobState.SUCCEEDED, "the requeued job to run")
    page.goto(f"/jobs/{job_id}")
    expect(page.locator("table").last).to_contain_text("otto via dashboard")
    expect(page.locator("table").last).to_contain_text("requeue")
    page.get_by_text("Show result").click()
    expect(page.locator("details.payload pre").last).to_contain_text("charged order 41")
    save(page, shots, "job", stack)


class EvilSite:
    """Another origin (a plain HTTP server) serving whatever page a test puts at a path."""

    def __init__(self) -> None:
        self.pages: dict[str, bytes] = {}
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(site.pages.get(self.path, b""))

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.handle_error = lambda *args: None  # type: ignore[method-assign]  # a closed tab
        self.url = f"http://localhost:{self.server.server_address[1]}"


@pytest.fixture
def evil_site() -> Iterator[EvilSite]:
    site = EvilSite()
    thread = threading.Thread(target=site.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.server.shutdown()
        site.server.server_close()


def test_a_cross_site_post_without_the_token_is_refused(
    stack: Stack, pages: Pages, evil_site: EvilSite
) -> None:
    [job_id] = enqueue(stack, [dash_app.archived.prepare(1)])
    target = f"{stack.base}/jobs/{job_id}/cancel"
    page = pages.as_user("ada")  # the admin's browser, with credentials a site can ride on
    form = f'<form id="f" method="post" action="{target}"><input name="x" value="1"></form>'
    evil_site.pages["/"] = f"<html><body>{form}</body></html>".encode()
    page.goto(evil_site.url + "/")
    with page.expect_response(target) as response:
        page.evaluate("document.getElementById('f').submit()")
    assert response.value.status == 403
    page.wait_for_url(target)
    expect(page.locator("body")).to_contain_text("Refused")
    assert job_state(stack, job_id) is JobState.PENDING
    # from the dashboard's own origin but with a forged token: refused too
    page.goto("/")
    refused = page.request.post(target, form={"csrf": "forged"})
    assert refused.status == 403
    assert job_state(stack, job_id) is JobState.PENDING
    # with the page's own token it goes through (so the refusals above were the token's)
    page.goto(f"/jobs/{job_id}")
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator(".notice")).to_contain_text("cancelled")
    assert job_state(stack, job_id) is JobState.CANCELLED


def test_a_script_in_an_error_renders_as_inert_text(stack: Stack, pages: Pages) -> None:
    stack.start_worker()
    [job_id] = enqueue(stack, [dash_app.hostile.prepare()])
    wait_until(lambda: job_state(stack, job_id) is JobState.DEAD, "the hostile job to die")
    page = pages.as_user("otto")
    alerts: list[str] = []
    page.on("dialog", lambda dialog: alerts.append(dialog.message))
    for path in (f"/jobs/{job_id}", "/dead", "/jobs?state=dead"):
        page.goto(path)
        expect(page.locator(".err").first).to_contain_text("<script>window.__pwned = 1</script>")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("img[src=x]").count() == 0
    assert alerts == []


def test_schedules_show_next_fires_and_the_last_slots_job(
    stack: Stack, pages: Pages, shots: Path
) -> None:
    async def fire_one_slot() -> None:
        scheduler = Scheduler(stack.app.registry, await stack.app.backend())
        now = datetime.now(UTC)
        await scheduler.tick(now - timedelta(minutes=16))
        await scheduler.tick(now)

    stack.run(fire_one_slot())
    page = pages.as_user("vera")
    page.goto("/schedules")
    row = page.locator("table.schedules tbody tr").first
    expect(row).to_contain_text("nightly-report")
    expect(row).to_contain_text("Europe/Paris")
    expect(row.locator("ul.fires li")).to_have_count(3)
    expect(row.locator('a[href*="/jobs/"]')).to_have_count(1)
    save(page, shots, "schedules", stack)


def test_keyset_paging_over_100k_jobs(stack: Stack, pages: Pages, shots: Path) -> None:
    page = pages.as_user("vera")
    page.goto("/jobs")  # what the tests before left: every state
    save(page, shots, "jobs", stack, full_page=False)
    started = time.perf_counter()
    batch = [dash_app.archived.prepare(i) for i in range(100_000)]
    ids = enqueue(stack, batch)
    print(f"\n[{_db(stack)}] enqueue_many of 100,000 rows: {time.perf_counter() - started:.2f} s")
    page.goto("/jobs?queue=archive")
    timings = []
    for _ in range(10):  # the first ten pages, following "older »"
        started = time.perf_counter()
        page.get_by_role("link", name="older »").click()
        page.wait_for_load_state()
        timings.append((time.perf_counter() - started) * 1000)
    expect(page.locator("table.jobs tbody tr")).to_have_count(50)
    deep = sorted(ids)[50]  # the last page: 50 rows before the 51st smallest id
    started = time.perf_counter()
    page.goto(f"/jobs?queue=archive&before={deep}")
    deep_ms = (time.perf_counter() - started) * 1000
    expect(page.locator("table.jobs tbody tr")).to_have_count(50)
    server_ms = page.locator(".pager small").inner_text()
    print(
        f"[{_db(stack)}] keyset pages over 100,000 jobs (browser round trip): first ten "
        f"{', '.join(f'{t:.0f}' for t in timings)} ms; deepest page {deep_ms:.0f} ms "
        f"({server_ms} on the server)"
    )
    rows = stack.run(
        stack.app.list_jobs(JobState.PENDING, JobFilter(queue="archive", limit=50), before_id=deep)
    )
    assert [j.id for j in rows] == sorted(ids)[:50][::-1]


def _db(stack: Stack) -> str:
    return "sqlite" if "sqlite" in stack.url else "postgres"
