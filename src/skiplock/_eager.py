"""Eager mode (``App(eager=True)``): a task runs at enqueue, in the caller's loop, for unit
tests with no database and no worker.

It still does what a worker would refuse to: arguments go through the strict JSON encoder and
back (a ``datetime`` argument is a TypeError at enqueue, as always), and so does the return
value, so a result a worker would bury (not JSON, over ``max_result_bytes``) raises here, at
enqueue, naming the task and the type. What the task raises is its outcome, as on a worker:
``handle.result()`` raises JobFailed (or JobCancelled for ``Cancel``), without retries.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Sequence
from datetime import UTC, datetime

from ._attempt import error_record
from ._job import JobContext, JobOutcome, JobState, NewJob, reset_current_job, set_current_job
from ._outcomes import Cancel
from ._payload import decode_args, encode_result
from ._registry import Registry
from ._task import Enqueuing, JobHandle
from .errors import JobNotFound

_ids = itertools.count(1)


class EagerMode:
    """Whether an app runs its tasks at enqueue, and the outcomes of the jobs it ran so
    (``result()`` and ``gather`` read them: there is nothing to wait for)."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.outcomes: dict[int, JobOutcome] = {}

    def outcome(self, job_id: int) -> JobOutcome:
        try:
            return self.outcomes[job_id]
        except KeyError:
            raise JobNotFound(f"no job with id {job_id} ran in eager mode") from None

    async def run(
        self, registry: Registry, owner: Enqueuing, batch: Sequence[NewJob]
    ) -> list[JobHandle]:
        """Run each job now, in order; ``owner`` (the app) is what the handles call."""
        handles: list[JobHandle] = []
        for job in batch:
            handle = JobHandle(next(_ids), job.task, job.queue, owner)
            self.outcomes[handle.id] = await _run_one(registry, handle.id, job)
            handles.append(handle)
        return handles


async def _run_one(registry: Registry, job_id: int, job: NewJob) -> JobOutcome:
    task = registry.get_task(job.task)
    args, kwargs = decode_args(job.args_json, job.kwargs_json)  # the JSON round trip
    if task.typed is not None:  # rebuilt as a worker would (they validated at enqueue)
        args, kwargs = task.typed.load_call(task.name, args, kwargs)
    now = datetime.now(UTC)
    token = set_current_job(JobContext(job_id, job.task, job.queue, 1, 1, now, None, now))
    try:
        value = task.fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        return _failed(job_id, exc)
    finally:
        reset_current_job(token)
    if not task.keep_result:
        return JobOutcome(job_id, JobState.SUCCEEDED, None)
    if task.typed is not None:
        value = task.typed.dump_result(task.name, value)
    stored = encode_result(task.name, value, registry.max_result_bytes)
    return JobOutcome(job_id, JobState.SUCCEEDED, stored)


def _failed(job_id: int, exc: Exception) -> JobOutcome:
    state = JobState.CANCELLED if isinstance(exc, Cancel) else JobState.DEAD
    return JobOutcome(job_id, state, None, json.loads(json.dumps(error_record(1, exc))))
