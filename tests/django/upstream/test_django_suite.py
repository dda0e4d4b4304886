"""Django's own backend tests (``tests/tasks/test_immediate_backend.py`` of the installed
Django, fetched by ``fetch.py``) run against ``SkiplockBackend``.

Each upstream test case is subclassed with ``TASKS`` pointing at ``DrainingSkiplockBackend``
(``backend.py``: SkiplockBackend, then a burst of skiplock's worker, so the upstream
assertions, written for a backend that runs the task inside ``enqueue``, check what skiplock
stored). Every test that is not run says why, in ``SKIPS``.
"""

from __future__ import annotations

import os
import unittest
from typing import Any

import pytest
from django.test import override_settings

from .fetch import Unavailable, upstream

try:
    immediate = upstream("test_immediate_backend")
    dummy = upstream("test_dummy_backend")
    framework = upstream("test_tasks")
except Unavailable as exc:  # offline: say so, run the rest of the suite (anything else fails)
    pytest.skip(f"Django's tests/tasks (PyPI) {exc}", allow_module_level=True)

ADAPTER = "tests.django.upstream.backend.DrainingSkiplockBackend"
OPTIONS: dict[str, Any] = {"database": "upstream"}
"""A store of its own (``upstream`` in the test project's settings), fresh as in Django's run."""
if os.environ.get("SKIPLOCK_DJANGO_DB") == "postgres":
    OPTIONS["schema"] = os.environ["SKIPLOCK_DJANGO_SCHEMA"] + "_up"


@pytest.fixture(scope="module", autouse=True)
def migrated_store() -> None:
    """skiplock's tables in the upstream store (its own migration, as ``manage.py migrate``
    runs it for a backend on that database)."""
    from skiplock.contrib.django import SkiplockBackend

    store = SkiplockBackend("upstream-migrate", {"OPTIONS": OPTIONS})
    store.app.run_sync(store.app.migrate())
    store.app.run_sync(store.app.close())


TASKS = {"default": {"BACKEND": ADAPTER, "QUEUES": [], "OPTIONS": OPTIONS}}
RECORDING = "tests.django.upstream.backend.RecordingSkiplockBackend"
DUMMY_TASKS = {"default": {"BACKEND": RECORDING, "QUEUES": [], "OPTIONS": OPTIONS}}
FRAMEWORK_TASKS = {
    "default": {"BACKEND": RECORDING, "QUEUES": ["default", "queue_1"], "OPTIONS": OPTIONS},
    "immediate": {"BACKEND": ADAPTER, "QUEUES": [], "OPTIONS": OPTIONS},
    "missing": {"BACKEND": "does.not.exist"},
}

COMMON = {
    "test_using_correct_backend": "asserts the backend's class (ImmediateBackend, DummyBackend)",
    "test_get_backend": "asserts the backend's class (DummyBackend)",
    "test_validate_on_enqueue": "switches TASKS back to Django's own backend inside the test",
    "test_validate_on_aenqueue": "switches TASKS back to Django's own backend inside the test",
}
SAME_OBJECT = (
    "compares the result enqueue returned with get_result's field by field; SkiplockBackend "
    "reads enqueued_at back from the row (the database's clock, microseconds after the "
    "caller's): every other field is equal (test_api.py)"
)
SKIPS: dict[str, dict[str, str]] = {
    "ImmediateBackendTestCase": {
        "test_throws_keyboard_interrupt": (
            "ImmediateBackend lets a task's KeyboardInterrupt end the caller; a worker records "
            "it as the task's failure (FAILED) and goes on (test_seed_fixes.py)"
        ),
        "test_cannot_get_result": "SkiplockBackend supports get_result (supports_get_result)",
        "test_cannot_refresh_result": "SkiplockBackend supports refresh (supports_get_result)",
        "test_cannot_pass_run_after": "SkiplockBackend supports run_after (supports_defer)",
    },
    "ImmediateBackendTransactionTestCase": {
        "test_doesnt_wait_until_transaction_commit_by_default": (
            "expects the task to have run inside the caller's transaction; a SkiplockBackend "
            "enqueue joins that transaction, so no worker sees the job before it commits (the "
            "point of enqueueing on Django's connection: test_api.py)"
        ),
    },
    "DummyBackendTestCase": {
        "test_get_result": SAME_OBJECT,
        "test_get_result_async": SAME_OBJECT,
        "test_refresh_result": (
            "edits DummyBackend's in-memory result and expects refresh() to read the edit; "
            "SkiplockBackend's refresh reads the row"
        ),
        "test_refresh_result_async": "as test_refresh_result",
        "test_clear": "DummyBackend.clear() forgets stored results; skiplock keeps its rows",
    },
    "TaskTestCase": {
        "test_get_result": SAME_OBJECT,
        "test_get_result_async": SAME_OBJECT,
        "test_refresh_result": SAME_OBJECT,
    },
}


def _skipping(case: type[Any]) -> type[Any]:
    upstream_name = case.__mro__[1].__name__
    for name, reason in {**COMMON, **SKIPS[upstream_name]}.items():
        if hasattr(case, name):
            setattr(case, name, unittest.skip(reason)(getattr(case, name)))
    return case


@_skipping
@override_settings(TASKS=TASKS)
class TestImmediateBackendSuite(immediate.ImmediateBackendTestCase):  # type: ignore[misc]
    databases = frozenset({"default", "upstream"})


@_skipping
@override_settings(TASKS=TASKS)
class TestImmediateBackendTransactionSuite(  # type: ignore[misc]
    immediate.ImmediateBackendTransactionTestCase
):
    databases = frozenset({"default", "upstream"})


@_skipping
@override_settings(TASKS=DUMMY_TASKS)
class TestDummyBackendSuite(dummy.DummyBackendTestCase):  # type: ignore[misc]
    databases = frozenset({"default", "upstream"})


@_skipping
@override_settings(TASKS=FRAMEWORK_TASKS, USE_TZ=True)
class TestFrameworkSuite(framework.TaskTestCase):  # type: ignore[misc]
    databases = frozenset({"default", "upstream"})
