"""``enqueue()`` inside ``transaction.atomic()``, the path every Django view takes (issue 42
item 9): on PostgreSQL skiplock's insert is prepared once per session on Django's own
connection, not parsed and planned at every call through Django's client-side-binding cursor
(5x slower than django-tasks-db's one-row INSERT); rollbacks, whole or to a savepoint, still
enqueue nothing, on both databases. The speed itself is measured in benchmarks/django_bench.py,
never asserted here."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction

from skiplock.contrib.django.models import Job

from .conftest import KIND
from .project.demo import tasks

INSERT = "%unnest%INSERT INTO %skiplock_jobs%"


def _prepared_inserts() -> dict[str, int]:
    """Executions of each variant of skiplock's insert prepared on Django's session, by name
    (psycopg prepares one per set of argument types: with unique keys, without...)."""
    rows = connection.connection.execute(
        "SELECT name, generic_plans + custom_plans FROM pg_prepared_statements "
        "WHERE statement LIKE %s",
        [INSERT],
    ).fetchall()
    return {str(name): int(runs) for name, runs in rows}


@pytest.mark.skipif(KIND != "postgres", reason="PostgreSQL's prepared statements")
def test_enqueues_in_one_atomic_prepare_the_insert_once() -> None:
    with transaction.atomic():
        tasks.add.enqueue(0, 0)
        prepared = _prepared_inserts()
        assert prepared, "skiplock's insert is not prepared on Django's session"
        results = [tasks.add.enqueue(i, i) for i in range(50)]
        after = _prepared_inserts()
    assert set(after) == set(prepared)  # no statement prepared again: the same one ran
    assert sum(after.values()) == sum(prepared.values()) + 50
    assert connection.connection.prepare_threshold is None  # the project's setting, kept
    assert Job.objects.filter(id__in=[int(r.id) for r in results]).count() == 50


class Rollback(Exception):
    pass


def test_rollbacks_around_prepared_enqueues_enqueue_nothing(run_worker: Any) -> None:
    """A savepoint rolled back, then a whole transaction: psycopg forgets its prepared
    statements at a rollback, and the next enqueue prepares the insert again."""
    with transaction.atomic():
        kept = tasks.add.enqueue(1, 1)
        with pytest.raises(Rollback), transaction.atomic():
            lost = tasks.add.enqueue(2, 2)
            raise Rollback
        also_kept = tasks.add.enqueue(3, 3)
    with pytest.raises(Rollback), transaction.atomic():
        also_lost = tasks.add.enqueue(4, 4)
        raise Rollback
    after = [tasks.add.enqueue(5, 5) for _ in range(3)]
    ids = {int(r.id) for r in (kept, lost, also_kept, also_lost, *after)}
    stored = set(Job.objects.filter(id__in=ids).values_list("id", flat=True))
    assert stored == {int(r.id) for r in (kept, also_kept, *after)}
    run_worker()
    assert [tasks.add.get_result(r.id).return_value for r in (kept, also_kept)] == [2, 6]
