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


STATES = [(s, s) for s in ("pending", "running", "succeeded", "cancelled", "dead")]


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
