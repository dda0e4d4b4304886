"""The dashboard over two PostgreSQL databases in a real browser (issue 46): the real
``skiplock dashboard`` command serving tests/apps/two_db_app.py, a job of each database on
the Jobs page with its database, and a click on database b's job opening its page there."""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import skiplock
from skiplock import Database
from skiplock._backends.params import JobInsertManyParams
from skiplock._lanes import ID_SPAN

from ..backends.helpers import new_job
from ..conftest import PG_URL
from ..helpers import pg_admin, wait_until
from .conftest import Stack

pytestmark = pytest.mark.slow

SPEC = "tests.apps.two_db_app:app"


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The served two-database app (this module's own: the shared one serves one database)."""
    tmp = tmp_path_factory.mktemp("dash-two")
    name = f"skiplock_db_{uuid.uuid4().hex[:10]}"
    other = f"{PG_URL.rsplit('/', 1)[0]}/{name}"
    schema = f"t_{uuid.uuid4().hex[:12]}"
    Stack.run_alone(pg_admin(f'CREATE SCHEMA "{schema}"'))
    Stack.run_alone(pg_admin(f'CREATE DATABASE "{name}"'))
    url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}schema={schema}"
    the_stack = Stack(url, tmp)
    the_stack.env["SKIPLOCK_TEST_OTHER_URL"] = other
    the_stack.app = skiplock.App(url, databases={"b": Database(other, number=1)})
    the_stack.run(the_stack.app.migrate())
    proc = the_stack.start(
        "dashboard",
        "dashboard",
        SPEC,
        "--port",
        str(the_stack.port),
        "--users",
        str(the_stack.users_file()),
        "--refresh",
        "0",
    )

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(the_stack.output("dashboard"))
        try:
            with urllib.request.urlopen(f"{the_stack.base}/static/dashboard.css", timeout=1):
                return True
        except (urllib.error.URLError, OSError):
            return False

    wait_until(up, "the dashboard to listen")
    try:
        yield the_stack
    finally:
        the_stack.stop()
        Stack.run_alone(pg_admin(f'DROP DATABASE "{name}" WITH (FORCE)'))
        Stack.run_alone(pg_admin(f'DROP SCHEMA "{schema}" CASCADE'))


def insert(stack: Stack, database: str, queue: str) -> int:
    async def write() -> int:
        backend = await stack.app.backend(database=database)
        (job_id,) = await backend.job_insert_many(JobInsertManyParams([new_job("t", queue=queue)]))
        return job_id

    return int(stack.run(write()))


def test_a_job_of_each_database_and_its_page(stack: Stack, pages: Any) -> None:
    own = insert(stack, "default", "own")
    far = insert(stack, "b", "far")
    assert far > ID_SPAN
    page = pages.as_user("otto")
    page.goto("/jobs")
    expect(page.locator("th", has_text="database")).to_have_count(1)
    expect(page.locator(f"tr[data-job='{own}'] td[data-database]")).to_have_text("default")
    expect(page.locator(f"tr[data-job='{far}'] td[data-database]")).to_have_text("b")
    page.locator(f"tr[data-job='{far}'] a").first.click()
    expect(page.locator("h1")).to_contain_text(f"Job {far}")
    expect(page.locator("dd[data-database]")).to_have_text("b")
    page.goto("/")
    expect(page.locator("tr[data-queue='far'][data-database='b']")).to_have_count(1)
