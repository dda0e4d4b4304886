"""skiplock's migrations of issues 42 and 43 (PostgreSQL 18-26, SQLite 17-26: workflow
sequences, unique scopes, SQLite's id counters, worker liveness: the live-worker registry's
silence limit, OS process and restart counts; the waits a release left unreleased;
concurrency keys' turns, and (25) a key's turns ending with its last live job; signals'
senders and whether a wait took them, and a parent's result kept once for its children; a
parked job's unique key (24); a batch's count of its pruned members), by skiplock's own
migration list run again (it applies only what is missing)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations

from ..schema import apply_skiplock_migrations


class Migration(migrations.Migration):  # type: ignore[misc]
    atomic = False  # as 0001: skiplock migrates on its own connection
    dependencies: ClassVar[list[Any]] = [("skiplock", "0010_waiting_state")]
    operations: ClassVar[list[Any]] = [
        migrations.RunPython(apply_skiplock_migrations, migrations.RunPython.noop, elidable=False)
    ]
