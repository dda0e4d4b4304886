"""The admin's job pages never 500: a Save is refused, tracebacks read as text, and a
project that has not migrated is told to."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from skiplock._backends.sqlite.storage import history as sqlite_history

from .project.demo import tasks

CHANGELIST = "/admin/skiplock/job/"


@pytest.fixture
def superuser() -> Client:
    user = User.objects.create_superuser(f"root-{uuid.uuid4().hex[:8]}", "r@example.com", "x")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def dead(run_worker: Any) -> Any:
    result = tasks.explode.enqueue("for the admin's change page")
    run_worker()
    return result


def test_saving_the_change_page_does_not_500(superuser: Client, dead: Any) -> None:
    page = f"{CHANGELIST}{dead.id}/change/"
    assert superuser.get(page).status_code == 200
    response = superuser.post(page, {"_save": "Save"})
    assert response.status_code in (302, 403), response.status_code
    assert b'name="_save"' not in superuser.get(page).content  # read-only: nothing to save


def test_the_traceback_renders_as_text(superuser: Client, dead: Any) -> None:
    html = superuser.get(f"{CHANGELIST}{dead.id}/change/").content.decode()
    assert "<pre" in html
    assert "Traceback (most recent call last):" in html
    assert "Boom: for the admin&#x27;s change page" in html
    assert "\\n" not in html.split("<pre", 1)[1].split("</pre>", 1)[0]  # lines, not JSON


@pytest.mark.parametrize("page", ["", "{id}/change/", "{id}/history/"])
def test_an_unmigrated_project_is_told_to_migrate(superuser: Client, dead: Any, page: str) -> None:
    """The list, and a job's page (a bookmark, a link from a log), once the table is gone."""
    conn = connections["default"]
    sqlite = conn.vendor == "sqlite"  # there skiplock_jobs is a view (SQLite migration 11)
    with conn.cursor() as cursor:
        if sqlite:
            cursor.execute("DROP VIEW skiplock_jobs")
        else:
            cursor.execute("ALTER TABLE skiplock_jobs RENAME TO skiplock_jobs_away")
    try:
        page = superuser.get(CHANGELIST + page.format(id=dead.id))
    finally:
        with conn.cursor() as cursor:
            if sqlite:
                sqlite_history.rebuild_view(conn.connection)
            else:
                cursor.execute("ALTER TABLE skiplock_jobs_away RENAME TO skiplock_jobs")
    assert page.status_code == 200
    assert b"manage.py migrate" in page.content
