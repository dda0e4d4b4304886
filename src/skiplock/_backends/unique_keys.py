"""Unique keys, as both dialects map them: the key space a job's key is unique in, and an
insert's ids back in input order from the rows it created and the live holders it met
(``DuplicateJob`` where a job asked for that).

Nothing here speaks SQL or touches a connection.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._job import (
    NewJob,
)
from ..errors import DuplicateJob

SHARED_SCOPE = ""
"""The ``unique_scope`` column of a key in the shared key space (``unique_scope="shared"``);
a key of a task's own holds the task's name there, which is never empty."""

KeyId = tuple[str, str]
"""A held key as the unique index knows it: (unique_key, unique_scope)."""


def unique_scope(job: NewJob) -> str | None:
    """The key space ``job``'s unique key is unique in: its task's name, SHARED_SCOPE, or
    None when it has no key."""
    if job.unique_key is None:
        return None
    return SHARED_SCOPE if job.unique_shared else job.task


def key_id(job: NewJob) -> KeyId | None:
    """``job``'s key as the unique index knows it; None when it has none."""
    if job.unique_key is None:
        return None
    return job.unique_key, SHARED_SCOPE if job.unique_shared else job.task


def map_inserted(
    jobs: Sequence[NewJob],
    inserted: Sequence[tuple[int, KeyId | None]],
    live: dict[KeyId, int],
    held: list[int] | None = None,
) -> list[int]:
    """Input order ids from the rows an insert created (in id order) and the live jobs that
    already held some unique keys (by key and scope); raises DuplicateJob where a job asked
    for that. A job that asked to ``replace`` its key's holder maps to it here, and its
    position goes to ``held`` (the holder is a job before the batch, or an earlier one of
    it)."""
    plain = iter([job_id for job_id, key in inserted if key is None])
    created = {key: job_id for job_id, key in inserted if key is not None}
    ids: list[int] = []
    for job in jobs:
        key = key_id(job)
        if key is None:
            ids.append(next(plain))
        elif key in created:
            ids.append(created.pop(key))
            live[key] = ids[-1]  # a later duplicate in this batch maps to it
        else:
            existing = live[key]
            if job.on_duplicate == "raise":
                raise DuplicateJob(
                    f"job {existing} already holds unique_key {job.unique_key!r}", existing
                )
            if job.on_duplicate == "replace" and held is not None:
                held.append(len(ids))
            ids.append(existing)
    return ids
