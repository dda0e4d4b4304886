"""The Django admin's jobs (issue 22 low 14): seeing arguments, results and tracebacks takes a
permission of its own (``skiplock.view_job_payload``), and the admin's actions act on the
database of the rows they were given, not on the first SkiplockBackend's."""

from __future__ import annotations

import uuid

from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.contrib.messages.storage.fallback import FallbackStorage
from django.tasks import task_backends
from django.test import Client, RequestFactory

from skiplock.contrib.django.admin import JobAdmin
from skiplock.contrib.django.models import Job

from .project.demo import tasks

CHANGELIST = "/admin/skiplock/job/"
SECRET = "argument-s3cret-for-the-admin"


def _staff(*codenames: str) -> tuple[User, Client]:
    user = User.objects.create_user(f"admin-{uuid.uuid4().hex[:8]}", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return user, client


def _dead(alias: str) -> int:
    result = tasks.explode.using(backend=alias).enqueue(SECRET)
    app = task_backends[alias].app
    app.run_sync(app.drain())
    return int(result.id.partition(":")[0])


def test_the_view_permission_alone_does_not_show_payloads() -> None:
    job_id = _dead("default")
    _, viewer = _staff("view_job")
    page = viewer.get(f"{CHANGELIST}{job_id}/change/")
    assert page.status_code == 200
    assert SECRET not in page.content.decode()
    assert "Traceback" not in page.content.decode()
    _, reader = _staff("view_job", "view_job_payload")
    page = reader.get(f"{CHANGELIST}{job_id}/change/")
    assert SECRET in page.content.decode()


def test_an_action_acts_on_the_database_of_its_rows() -> None:
    job_id = _dead("jobs")  # the "jobs" database, a SQLite file of its own
    user, _ = _staff("view_job", "change_job")
    request = RequestFactory().post(CHANGELIST)
    request.user = user
    request.session = {}
    request._messages = FallbackStorage(request)
    JobAdmin(Job, admin.site).requeue_dead(request, Job.objects.using("jobs").filter(id=job_id))
    jobs = task_backends["jobs"].app
    record = jobs.run_sync(jobs.get_job(job_id))
    assert record.state == "pending"
    assert record.audit[-1]["who"] == user.get_username()
