"""Non-guessable result ids (issue 22 low 13): with ``OPTIONS["signed_result_ids"]`` a
result id is the job's id signed with ``SECRET_KEY``, so a view that looks results up by an id
it was handed cannot be walked through every job by counting. Off (the default), ids stay
the job's integer id."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.tasks import task_backends
from django.tasks.exceptions import TaskResultDoesNotExist
from django.test import override_settings

from skiplock.contrib.django import checks

from .project.demo import tasks


@pytest.fixture
def signed() -> Iterator[Any]:
    """A backend ``signed``: the default one's database, result ids signed."""
    backend = copy.deepcopy(settings.TASKS["default"])
    backend["OPTIONS"]["signed_result_ids"] = True
    with override_settings(TASKS={**settings.TASKS, "signed": backend}):
        made = task_backends["signed"]
        yield made
        if made._app is not None:
            made.app.run_sync(made.app.close())


def test_a_signed_id_is_not_the_job_id_and_only_it_finds_the_result(signed: Any) -> None:
    result = tasks.add.using(backend="signed").enqueue(20, 22)
    job_id, _, signature = result.id.partition(":")
    assert job_id.isdigit() and len(signature) >= 20
    assert signed.get_result(result.id).status == "READY"
    for guess in (job_id, f"{job_id}:{'A' * len(signature)}", f"{int(job_id) + 1}:{signature}"):
        with pytest.raises(TaskResultDoesNotExist):
            signed.get_result(guess)
    signed.app.run_sync(signed.app.drain())
    result.refresh()
    assert result.return_value == 42 and result.id == f"{job_id}:{signature}"


def test_without_the_option_ids_stay_the_job_id(backend: Any) -> None:
    result = tasks.add.enqueue(1, 2)
    assert result.id.isdigit()
    assert backend.get_result(result.id).id == result.id


def test_the_option_is_checked() -> None:
    errors = list(checks.check_options("x", {"signed_result_ids": "yes"}))
    assert [e.id for e in errors] == ["skiplock.E004"]
    assert "signed_result_ids" in errors[0].msg


class Rollback(Exception):
    """The view's business step failed: its transaction rolls back, the job with it."""


@pytest.mark.parametrize("alias", ["default", "signed"])
def test_an_id_handed_out_in_a_rolled_back_atomic_block_never_finds_another_job(
    alias: str, signed: Any
) -> None:
    """A view enqueues inside ``atomic()``, sends the result id to its client, then fails
    and rolls back. The id must stay "does not exist": on SQLite it was handed out again to
    the next enqueue, so the client's id read another job's arguments and result."""
    backend = task_backends[alias]
    try:
        with transaction.atomic():
            lost = tasks.add.using(backend=alias).enqueue(1, 1)
            raise Rollback
    except Rollback:
        pass
    later = [tasks.add.using(backend=alias).enqueue(n, 100).id for n in range(3)]
    assert lost.id not in later
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(lost.id)
    backend.app.run_sync(backend.app.drain())
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(lost.id)
