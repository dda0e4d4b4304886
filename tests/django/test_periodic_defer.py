"""django-tasks-concurrent's ``PeriodicDefer`` (spec C12/C13) over skiplock's slot ledger:
``claim_slot`` has one winner per slot, a slot the scheduler fired is a row, and the admin
lists the ledger without letting anyone change or delete a row (a deleted row would let
its slot fire twice)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from .project.demo import tasks

CHANGELIST = "/admin/skiplock/periodicdefer/"
SLOT = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)


def _staff(*codenames: str, superuser: bool = False) -> Client:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    user = User.objects.create_user(name, is_staff=True, is_superuser=superuser)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def test_claim_slot_has_one_winner_per_slot() -> None:
    from skiplock.contrib.django.models import PeriodicDefer

    name = f"tests.claims.task_{uuid.uuid4().hex[:8]}"
    created = SLOT + timedelta(seconds=1)
    claim = PeriodicDefer.objects.claim_slot
    assert claim(name, "", SLOT, created) is True
    assert claim(name, "", SLOT, created + timedelta(seconds=5)) is False
    assert claim(name, "", SLOT + timedelta(minutes=1), created) is True  # the next slot
    row = PeriodicDefer.objects.get(schedule=name, defer_at=SLOT)
    assert (row.task_name, row.periodic_id, row.defer_at, row.created) == (
        name,
        "",
        SLOT,
        created,  # the claim's own time, as the seed wrote it
    )
    assert str(row) == f"{name} @ {SLOT}"


def test_claim_slot_checks_its_values() -> None:
    from skiplock.contrib.django.models import PeriodicDefer

    claim = PeriodicDefer.objects.claim_slot
    with pytest.raises(ValueError, match="defer_at must be a timezone-aware datetime"):
        claim("tests.claims.x", "", SLOT.replace(tzinfo=None), SLOT)
    with pytest.raises(ValueError, match="created must be a timezone-aware datetime"):
        claim("tests.claims.x", "", SLOT, "now")
    with pytest.raises(TypeError, match="periodic_id must be a str"):
        claim("tests.claims.x", None, SLOT, SLOT)
    with pytest.raises(ValueError, match="task_name must not be empty"):
        claim("", "", SLOT, SLOT)


def test_a_slot_the_scheduler_fired_is_a_periodic_defer_row() -> None:
    from skiplock.contrib.django.models import PeriodicDefer
    from skiplock.contrib.django.periodic_tasks import PERIODIC_TASKS
    from skiplock.contrib.django.scheduler import defer_one

    entry = PERIODIC_TASKS[(tasks.tick.module_path, "tick-every-second")]
    now = SLOT + timedelta(days=1, microseconds=int(uuid.uuid4().int % 999_999))
    assert defer_one(entry, now, now - timedelta(seconds=5)) is True
    slot = entry.current_slot(now)
    row = PeriodicDefer.objects.get(schedule="tick-every-second", defer_at=slot)
    assert (row.task_name, row.periodic_id) == entry.key
    assert row.job_id is not None and not row.skipped
    assert str(row) == f"{entry.task_name}@tick-every-second @ {slot}"
    # the scheduler and claim_slot share one ledger: the slot it fired is taken here too
    assert PeriodicDefer.objects.claim_slot(*entry.key, slot, now) is False


def test_admin_lists_the_ledger_and_refuses_to_change_it() -> None:
    from skiplock.contrib.django.models import PeriodicDefer

    name = f"tests.claims.admin_{uuid.uuid4().hex[:8]}"
    assert PeriodicDefer.objects.claim_slot(name, "", SLOT, SLOT)
    page = _staff("view_periodicdefer").get(CHANGELIST, {"q": name})
    assert page.status_code == 200
    rows = list(page.context_data["cl"].result_list)
    assert [(r.schedule, r.defer_at) for r in rows] == [(name, SLOT)]
    assert name in page.content.decode()
    everything = _staff(superuser=True)
    for url in (f"{CHANGELIST}{name}/change/", f"{CHANGELIST}{name}/delete/", f"{CHANGELIST}add/"):
        assert everything.get(url).status_code == 403, url
        assert everything.post(url, {"post": "yes"}).status_code == 403, url
    listed = everything.get(CHANGELIST, {"q": name})
    assert listed.status_code == 200 and "delete_selected" not in listed.content.decode()
    assert PeriodicDefer.objects.filter(schedule=name).count() == 1


def test_admin_needs_the_view_permission() -> None:
    assert _staff("view_job").get(CHANGELIST).status_code == 403
