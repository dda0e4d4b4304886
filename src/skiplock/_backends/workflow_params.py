"""The records the ``Backend``'s workflow operations take (``protocol.py`` names them): one
frozen dataclass per operation that needs more than an id, as ``params.py`` has for the
others. Nothing here speaks SQL or imports a dialect. The four a durable step or wait
takes (``WorkflowStep*Params``, ``WorkflowSignalTakeParams``, ``WorkflowWaitPrepareParams``)
are defined in ``_durable.py`` with ``DurableStore``, a layer below, and named here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._durable import WorkflowSignalTakeParams as WorkflowSignalTakeParams
from .._durable import WorkflowStepGetParams as WorkflowStepGetParams
from .._durable import WorkflowStepPutParams as WorkflowStepPutParams
from .._durable import WorkflowWaitPrepareParams as WorkflowWaitPrepareParams
from .._job import NewJob
from .workflow_plan import Plan


@dataclass(frozen=True, slots=True)
class WorkflowEnqueueParams:
    """A workflow's plan to write, in the caller's transaction if ``connection``."""

    plan: Plan
    connection: object | None


@dataclass(frozen=True, slots=True)
class WorkflowEnqueueSyncParams:
    """A workflow's plan to write in the caller's own synchronous connection's transaction."""

    plan: Plan
    connection: object


@dataclass(frozen=True, slots=True)
class WorkflowOpenBatchParams:
    """A new batch's callbacks (None: none), in the caller's transaction if ``connection``."""

    on_success: NewJob | None
    on_complete: NewJob | None
    connection: object | None


@dataclass(frozen=True, slots=True)
class WorkflowAfterCompletionParams:
    """The jobs a completion finished and those it parked, for the workflow's follow-up."""

    finished: Sequence[int]
    parked: Sequence[int]


@dataclass(frozen=True, slots=True)
class WorkflowAbortBatchParams:
    """An open batch to close as aborted, and the error its cancelled jobs get."""

    batch_id: int
    error_json: str


@dataclass(frozen=True, slots=True)
class WorkflowSignalParams:
    """A signal from ``who`` for a job's mailbox ``name``, at most ``kept_most`` untaken."""

    job_id: int
    name: str
    payload_json: str | None
    who: str
    kept_most: int


@dataclass(frozen=True, slots=True)
class WorkflowLinksParams:
    """A job's links: its first ``parents_limit`` parents and ``children_limit`` children."""

    job_id: int
    children_limit: int
    parents_limit: int


@dataclass(frozen=True, slots=True)
class WorkflowLinkedParams:
    """A page of a job's parents (else children): at most ``limit`` after id ``after``."""

    job_id: int
    parents: bool
    after: int
    limit: int


@dataclass(frozen=True, slots=True)
class WorkflowGraphParams:
    """A job whose workflow graph to read, at most ``most`` jobs of it."""

    job_id: int
    most: int
