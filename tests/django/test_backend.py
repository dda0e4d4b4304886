"""The Django Tasks backend end to end: enqueue on Django's connection, a real skiplock
worker runs it, ``get_result`` reads it back."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from django.tasks import TaskResultStatus

from .project.demo import tasks


def test_enqueue_run_get_result(run_worker: Any) -> None:
    result = tasks.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    run_worker()
    done = tasks.add.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 5
    assert done.args == [2, 3]


def test_import_skiplock_does_not_import_django() -> None:
    code = (
        "import sys, skiplock, skiplock.contrib.django; "
        "assert not any(m.startswith('django') for m in sys.modules), 'django imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_sync_task_uses_the_orm(run_worker: Any) -> None:
    from django.contrib.auth.models import User

    result = tasks.count_users.enqueue()
    run_worker()
    assert tasks.count_users.get_result(result.id).return_value == User.objects.count()
