"""``WorkflowOps``: what the App does for workflows beyond enqueueing them: batches (open,
close, counts), signals (``app.signal``: the CLI's and the dashboard's too), and the reads a
person uses to see a workflow (a job's links, the waiting jobs, a job's graph).

A part the App composes over the backend; the public methods' documentation is on ``App``."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from ._app_control import default_who
from ._app_databases import Databases
from ._attempt import MAX_MESSAGE_CHARS
from ._backends.workflow_params import (
    WorkflowAbortBatchParams,
    WorkflowGraphParams,
    WorkflowLinkedParams,
    WorkflowLinksParams,
    WorkflowOpenBatchParams,
    WorkflowSignalParams,
)
from ._durable import check_name, signal_payload
from ._job import NewJob
from ._lanes import DEFAULT
from ._limits import DEFAULT_MAX_SIGNALS_KEPT, MAX_PARENTS, check_int, check_text
from ._workflow import Signature
from ._workflow_records import (
    BatchInfo,
    JobLinks,
    LinkedJob,
    SignalReceipt,
    WaitingJob,
    WorkflowGraph,
)
from .errors import ConfigurationError

MAX_CHILDREN_SHOWN = 1000
MAX_GRAPH_JOBS = 2000

Audit = Callable[[str, str, str, str, str], Coroutine[Any, Any, None]]
"""``Operations._audit``: what, who, target, detail, and the database it is written to."""


def batch_aborted_record(batch_id: int, reason: BaseException) -> str:
    """The error a job cancelled with its aborted batch keeps (the shape of an attempt's)."""
    what = f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__
    return json.dumps(
        {
            "attempt": 0,
            "at": datetime.now(UTC).isoformat(),
            "message": f"batch {batch_id} was aborted: its block raised {what}"[:MAX_MESSAGE_CHARS],
            "type": "BatchAborted",
            "traceback": None,
            "worker": None,
        }
    )


class WorkflowOps:
    def __init__(
        self,
        backend: Databases,
        max_payload_bytes: int,
        audit: Audit,
        max_signals_kept: int = DEFAULT_MAX_SIGNALS_KEPT,
    ) -> None:
        self.backend = backend
        self.max_payload_bytes = max_payload_bytes
        self.max_signals_kept = max_signals_kept
        self._audit = audit

    def batch_database(
        self, on_success: Signature | None, on_complete: Signature | None, database: str | None
    ) -> str:
        """Where a batch lives: its callbacks' database (their rows wait for its members
        there, so a callback routed to a lane of another database would never run), which
        ``database`` must name if given; the App's own when it has neither."""
        callbacks = [
            sig.task.prepare_call(sig.args, sig.kwargs, leading=1)
            for sig in (on_success, on_complete)
            if isinstance(sig, Signature)
        ]
        return self._home_of(callbacks, database)

    def _home_of(self, callbacks: list[NewJob], database: str | None) -> str:
        """``batch_database`` of callbacks already prepared."""
        if database is not None:
            self.backend.chosen(database)  # an unknown name: ConfigurationError
        lanes = {job.lane for job in callbacks}
        directory = self.backend.directory
        theirs = sorted({directory.database_of(lane) for lane in lanes})
        if len(theirs) > 1:
            raise ConfigurationError(
                "app.batch(): a batch lives in one database, and its callbacks go to "
                f"{' and '.join(repr(d) for d in theirs)} (route them to lanes of one database)"
            )
        if theirs and database is not None and theirs[0] != database:
            raise ConfigurationError(
                f"app.batch(database={database!r}): its callbacks go to database "
                f"{theirs[0]!r}, where the batch must live (name that one, or leave it out)"
            )
        return theirs[0] if theirs else (database or DEFAULT)

    async def open_batch(
        self,
        on_success: Signature | None,
        on_complete: Signature | None,
        database: str | None = None,
    ) -> int:
        if on_success is None and on_complete is None:
            raise ConfigurationError(
                "app.batch(): give on_success= or on_complete= (a signature: task.s(...)); a "
                "batch without a callback is a group (skiplock.group)"
            )
        jobs: list[NewJob | None] = []
        for option, sig in (("on_success", on_success), ("on_complete", on_complete)):
            if sig is None:
                jobs.append(None)
                continue
            if not isinstance(sig, Signature):
                raise ConfigurationError(f"{option}: {sig!r} is not a signature (task.s(...))")
            jobs.append(sig.task.prepare_call(sig.args, sig.kwargs, leading=1))
        where = self._home_of([job for job in jobs if job is not None], database)
        return await (await self.backend(where)).workflow_open_batch(
            WorkflowOpenBatchParams(jobs[0], jobs[1], None)
        )

    async def close_batch(self, batch_id: int, *, database: str = DEFAULT) -> bool:
        check_int("batch_id", batch_id, 1, 2**63 - 1)
        self.backend.chosen(database)
        return await (await self.backend(database)).workflow_close_batch(batch_id)

    async def abort_batch(
        self, batch_id: int, reason: BaseException, *, database: str = DEFAULT
    ) -> bool:
        check_int("batch_id", batch_id, 1, 2**63 - 1)
        self.backend.chosen(database)
        error = batch_aborted_record(batch_id, reason)
        return await (await self.backend(database)).workflow_abort_batch(
            WorkflowAbortBatchParams(batch_id, error)
        )

    async def batch_info(self, batch_id: int, *, database: str = DEFAULT) -> BatchInfo:
        check_int("batch_id", batch_id, 1, 2**63 - 1)
        self.backend.chosen(database)
        return await (await self.backend(database)).workflow_batch_info(batch_id)

    async def signal(
        self, job_id: int, name: str, payload: Any = None, *, who: str = ""
    ) -> SignalReceipt:
        check_int("job_id", job_id, 1, 2**63 - 1)
        check_name("name", name)
        if who:
            check_text("who", who)
        text = signal_payload(name, payload, self.max_payload_bytes)
        who = who or default_who()
        database = self.backend.name_of_id(job_id)
        backend = await self.backend(database)
        # MailboxFull writes nothing, here too: a loop of refused signals leaves no rows
        sent = WorkflowSignalParams(job_id, name, text, who, self.max_signals_kept)
        receipt = await backend.workflow_signal(sent)
        outcome = f"{name}: {receipt.outcome.value}"
        await self._audit("signal", who, f"job {job_id}", outcome, database)
        return receipt

    async def job_links(
        self,
        job_id: int,
        children_limit: int = MAX_CHILDREN_SHOWN,
        parents_limit: int = MAX_PARENTS,
    ) -> JobLinks:
        check_int("job_id", job_id, 1, 2**63 - 1)
        check_int("children_limit", children_limit, 1, 100_000)
        check_int("parents_limit", parents_limit, 1, MAX_PARENTS)
        links = WorkflowLinksParams(job_id, children_limit, parents_limit)
        return await (await self.backend.of_id(job_id)).workflow_links(links)

    async def linked_jobs(
        self, job_id: int, side: str, after: int | None, limit: int
    ) -> list[LinkedJob]:
        check_int("job_id", job_id, 1, 2**63 - 1)
        if side not in ("parents", "children"):
            raise ConfigurationError(f"side={side!r}: must be 'parents' or 'children'")
        if after is not None:
            check_int("after", after, 1, 2**63 - 1)
        check_int("limit", limit, 1, 10_000)
        backend = await self.backend.of_id(job_id)
        page = WorkflowLinkedParams(job_id, side == "parents", after or 0, limit)
        return await backend.workflow_linked(page)

    async def waiting_jobs(self, limit: int = 200) -> list[WaitingJob]:
        check_int("limit", limit, 1, 10_000)
        found: list[WaitingJob] = []
        for name in self.backend.chosen(None):  # by id, as each database lists them
            left = limit - len(found)
            if left <= 0:
                break
            found += await (await self.backend(name)).workflow_waiting(left)
        return found

    async def workflow_graph(self, job_id: int, most: int = MAX_GRAPH_JOBS) -> WorkflowGraph:
        check_int("job_id", job_id, 1, 2**63 - 1)
        check_int("most", most, 1, 100_000)
        graph = WorkflowGraphParams(job_id, most)
        return await (await self.backend.of_id(job_id)).workflow_graph(graph)
