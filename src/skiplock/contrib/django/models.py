"""An unmanaged model over skiplock's job table, for the admin to read (never to write:
changes go through skiplock's own operations, which keep the audit trail and wake workers)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import models


class Timestamp(models.FloatField):  # type: ignore[misc]
    """A skiplock time: ``timestamptz`` on PostgreSQL, epoch seconds (REAL) on SQLite."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
        return value

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, datetime):
            return value  # a time compared or written: converted per database below
        return super().get_prep_value(value)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        """A datetime as the column stores it: epoch seconds on SQLite, itself on PostgreSQL
        (a FloatField's float() of a datetime raised TypeError: filters and saves failed)."""
        if isinstance(value, datetime):
            return value.timestamp() if connection.vendor == "sqlite" else value
        return super().get_db_prep_value(value, connection, prepared)


STATES = [(s, s) for s in ("pending", "running", "succeeded", "cancelled", "dead", "waiting")]

LIVE_STATES = ("pending", "running")
"""The states of PostgreSQL's live partition (its segments, which skiplock rotates)."""

REST_STATES = ("succeeded", "cancelled", "dead", "waiting")
"""Every other state: the history, dead and waiting jobs."""


def reads_in_parts(queryset: Any) -> bool:
    """Whether ``queryset``'s reads of the whole table go in two parts: on PostgreSQL, for a
    plain filter (no slice, distinct, grouping or set operation of its own)."""
    from django.db import connections

    query = queryset.query
    return bool(
        connections[queryset.db].vendor == "postgresql"
        and not query.is_sliced
        and not query.distinct
        and query.group_by is None
        and query.combinator is None
    )


class JobQuerySet(models.QuerySet):  # type: ignore[misc]
    """Jobs, counted without holding the live ones while the history is read.

    On PostgreSQL ``count()`` counts the rest (history, dead and waiting jobs) and then the
    live jobs, in two statements: a count of the whole table in one statement locks every
    partition, the live segments too, for as long as it reads the history, and skiplock's
    rotation of those segments gives up while any session holds one. The sum is the table's
    count (every job is in one state); the live statement comes last, so under a transaction
    (``ATOMIC_REQUESTS``, an ``atomic`` block) the segments are held from it to the end only."""

    def count(self) -> int:
        if self._result_cache is not None or not reads_in_parts(self):
            return int(super().count())
        rest = super(JobQuerySet, self.filter(state__in=REST_STATES)).count()
        return int(rest) + int(super(JobQuerySet, self.filter(state__in=LIVE_STATES)).count())


class Job(models.Model):  # type: ignore[misc]
    id = models.BigIntegerField(primary_key=True)
    queue = models.TextField()
    task = models.TextField()
    state = models.TextField(choices=STATES)
    priority = models.IntegerField()
    attempt = models.IntegerField()
    max_attempts = models.IntegerField()
    args = models.JSONField()
    kwargs = models.JSONField()
    errors = models.JSONField()
    audit = models.JSONField()
    result = models.JSONField(null=True)
    run_at = Timestamp()
    created_at = Timestamp()
    attempted_at = Timestamp(null=True)
    finished_at = Timestamp(null=True)
    locked_by = models.TextField(null=True)
    payload_version = models.IntegerField(null=True)
    """The version of the task's arguments (NULL: a row from before skiplock migration 9, 1)."""

    objects = JobQuerySet.as_manager()

    class Meta:
        managed = False
        db_table = "skiplock_jobs"
        ordering = ("-id",)
        # Arguments, results and tracebacks routinely quote what a job was given: seeing them
        # is a permission of its own, beyond view_job (the admin hides them without it).
        permissions = (("view_job_payload", "Can view job arguments, results and errors"),)

    def __str__(self) -> str:
        return f"job {self.id} ({self.task}, {self.state})"


class ImportedTask(models.Model):  # type: ignore[misc]
    """A django-tasks-db row moved to skiplock (``manage.py import_tasks_db``): its old id,
    so ``get_result(old_id)`` still finds it, and the job it became."""

    old_id = models.CharField(max_length=64, primary_key=True)
    job_id = models.BigIntegerField()
    backend = models.CharField(max_length=32)
    """The SkiplockBackend alias the job was moved to."""

    class Meta:
        db_table = "skiplock_django_imported_task"

    def __str__(self) -> str:
        return f"{self.old_id} -> job {self.job_id}"


class PeriodicDeferManager(models.Manager):  # type: ignore[misc]
    def claim_slot(
        self, task_name: str, periodic_id: str, defer_at: datetime, created: datetime
    ) -> bool:
        """Claim one slot of a ``@periodic`` schedule (django-tasks-concurrent's C13): True if
        this call took it, False if another claim has it (not an error: the caller's
        transaction stays usable). It goes through the same backend claim skiplock's own
        schedulers make, on the router's database for writes, so one slot has one winner
        whoever claims it. Nothing is enqueued here: the caller enqueues, in its transaction."""
        from django.db import connections, router, transaction

        from ..._backends.params import CronSlotSyncParams
        from ._ledger import ledger_on

        for name, value in (("task_name", task_name), ("periodic_id", periodic_id)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        if not task_name:
            raise ValueError("task_name must not be empty")
        for label, when in (("defer_at", defer_at), ("created", created)):
            if not isinstance(when, datetime) or when.tzinfo is None:
                raise ValueError(f"{label} must be a timezone-aware datetime, got {when!r}")
        ledger = ledger_on(router.db_for_write(self.model))
        with transaction.atomic(using=ledger.database):
            conn = connections[ledger.database]
            conn.ensure_connection()
            params = CronSlotSyncParams(
                schedule_key(task_name, periodic_id),
                defer_at,
                conn.connection,
                lambda: None,
                created=created,
            )
            return ledger.backend.cron_slot_claim_sync(params)


def schedule_key(task_name: str, periodic_id: str) -> str:
    """The ledger's ``schedule`` of a registration: ``PeriodicTask.schedule_id``'s rule."""
    return periodic_id or task_name


class PeriodicDefer(models.Model):  # type: ignore[misc]
    """One claimed slot of a schedule: a row of skiplock's slot ledger (``skiplock_cron_slots``,
    written by skiplock's schedulers and by ``claim_slot``), under django-tasks-concurrent's
    names. The ledger keys a slot by one ``schedule`` string (the ``periodic_id``, else the
    task's path), so ``task_name`` and ``periodic_id`` are read back through the registered
    ``@periodic`` tasks; the seed's ``id`` has no column (``schedule`` stands in as the
    primary key Django needs: rows are only listed, never fetched or saved by it)."""

    schedule = models.TextField(primary_key=True)
    defer_at = Timestamp(db_column="slot")
    """The slot, not the run time."""
    created = Timestamp(db_column="created_at")
    """When the claim was made."""
    job_id = models.BigIntegerField(null=True)
    """The skiplock job the slot enqueued (None: skipped, or a task stored elsewhere)."""
    skipped = models.BooleanField()

    objects = PeriodicDeferManager()

    class Meta:
        managed = False
        db_table = "skiplock_cron_slots"
        ordering = ("-defer_at",)

    def _registration(self) -> tuple[str, str]:
        from .periodic_tasks import registered_periodic_tasks

        for entry in registered_periodic_tasks():
            if entry.schedule_id == self.schedule:
                return entry.key
        return (self.schedule, "")  # no such registration (any more): the key is the name

    @property
    def task_name(self) -> str:
        return self._registration()[0]

    @property
    def periodic_id(self) -> str:
        return self._registration()[1]

    @property
    def title(self) -> str:
        task_name, periodic_id = self._registration()
        where = f"{task_name}@{periodic_id}" if periodic_id else task_name
        return f"{where} @ {self.defer_at}"

    def __str__(self) -> str:
        return str(self.title)
