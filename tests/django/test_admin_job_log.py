"""A job's own log (issue 47) in the Django admin: a Django task with
``@skiplock_options(job_log=True)`` keeps what it logs while it runs, and the admin's job page
shows it only to staff who may see the job's arguments (``skiplock.view_job_payload``): a log
may quote them."""

from __future__ import annotations

import logging
import uuid

from django.contrib.auth.models import Permission, User
from django.tasks import task, task_backends
from django.test import Client

from skiplock.contrib.django import skiplock_options

CHANGELIST = "/admin/skiplock/job/"
SECRET = "log-s3cret-for-the-admin"
log = logging.getLogger("tests.django.job_log")
log.setLevel(logging.DEBUG)


@task
@skiplock_options(job_log=True)
def chatty(account: str) -> None:
    log.info("syncing %s", account)
    log.warning("done with %s", account)


def _staff(*codenames: str) -> Client:
    user = User.objects.create_user(f"admin-{uuid.uuid4().hex[:8]}", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def test_the_job_page_shows_the_jobs_own_log_to_staff_who_see_payloads() -> None:
    result = chatty.enqueue(SECRET)
    app = task_backends["default"].app
    app.run_sync(app.drain())
    job_id = int(result.id.partition(":")[0])
    (kept,) = app.run_sync(app.job_logs(job_id))
    mine = [line for line in kept.lines if line.logger == log.name]  # django.tasks' too
    assert [(line.level, line.message) for line in mine] == [
        ("INFO", f"syncing {SECRET}"),
        ("WARNING", f"done with {SECRET}"),
    ]
    viewer = _staff("view_job")
    page = viewer.get(f"{CHANGELIST}{job_id}/change/").content.decode()
    assert SECRET not in page and "Job log" not in page
    reader = _staff("view_job", "view_job_payload")
    page = reader.get(f"{CHANGELIST}{job_id}/change/").content.decode()
    assert "Job log" in page and f"log of attempt 1: {len(kept.lines)} lines" in page
    assert f"WARNING  tests.django.job_log: done with {SECRET}" in page
