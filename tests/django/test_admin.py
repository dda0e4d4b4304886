"""skiplock's jobs in the Django admin, through Django's test client."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from .project.demo import tasks

CHANGELIST = "/admin/skiplock/job/"


def _staff(*codenames: str) -> Client:
    user = User.objects.create_user(f"admin-{uuid.uuid4().hex[:8]}", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def _job(backend: Any, result: Any) -> Any:
    return backend.app.run_sync(backend.app.get_job(int(result.id)))


@pytest.fixture
def dead(run_worker: Any) -> Any:
    result = tasks.explode.enqueue("for the admin")
    run_worker()
    return result


def test_changelist_lists_jobs_with_filters(dead: Any) -> None:
    page = _staff("view_job").get(CHANGELIST, {"state": "dead"})
    assert page.status_code == 200
    changelist = page.context_data["cl"]
    assert int(dead.id) in [job.id for job in changelist.result_list]
    assert {job.state for job in changelist.result_list} == {"dead"}
    assert [spec.title for spec in changelist.filter_specs] == ["state", "queue", "task"]


def test_requeue_dead_is_audited_with_the_user(backend: Any, dead: Any) -> None:
    client = _staff("view_job", "change_job")
    form = {"action": "requeue_dead", "_selected_action": [dead.id]}
    assert client.post(CHANGELIST, form).status_code == 302
    job = _job(backend, dead)
    assert job.state == "pending"
    assert job.audit[-1]["who"].startswith("admin-")


def test_cancel_pending_is_audited(backend: Any) -> None:
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
    client = _staff("view_job", "change_job")
    client.post(CHANGELIST, {"action": "cancel_pending", "_selected_action": [later.id]})
    job = _job(backend, later)
    assert job.state == "cancelled"
    assert job.audit[-1]["who"].startswith("admin-")


def test_actions_need_the_change_permission(backend: Any, dead: Any) -> None:
    client = _staff("view_job")
    assert b"requeue_dead" not in client.get(CHANGELIST).content
    client.post(CHANGELIST, {"action": "requeue_dead", "_selected_action": [dead.id]})
    assert _job(backend, dead).state == "dead"


def test_jobs_are_read_only(dead: Any) -> None:
    client = _staff("view_job", "change_job", "add_job", "delete_job")
    assert client.get(f"{CHANGELIST}add/").status_code == 403
    assert client.get(f"{CHANGELIST}{dead.id}/delete/").status_code == 403
