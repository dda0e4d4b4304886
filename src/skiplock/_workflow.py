"""The canvas: signatures, chains, groups and chords (Celery's words and conventions), and
the handle a workflow's enqueue returns.

A workflow is compiled, here, into a ``Plan``: one job per signature, in an order where
every parent comes first, each with the jobs it waits for. The backend writes the plan in
one transaction (all or none, in the caller's transaction with ``using(connection=...)``):
the first jobs pending, the rest ``waiting``. As parents succeed, their children become
pending with the result in front of their arguments: a chain's link gets the previous link's
result as its first positional argument, a chord's body (or anything after a group) the
list of the group's results in member order. An immutable signature (``task.si(...)``)
takes none.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ._backends.workflow_plan import Node, Plan
from ._config import require
from ._job import JobOutcome, NewJob
from ._limits import MAX_PARENTS, MAX_WORKFLOW_DEPTH, MAX_WORKFLOW_JOBS
from ._waiting import unwrap
from .errors import BlockingCallInLoop, ConfigurationError

T = TypeVar("T")


class Handle(Protocol):
    """A job's handle (``JobHandle`` is one)."""

    @property
    def id(self) -> int: ...

    def rebuilt(self, value: Any) -> Any: ...


class WorkflowApp(Protocol):
    """What a workflow calls on the app its tasks belong to (``App`` is one)."""

    async def enqueue_plan(
        self, plan: Plan, *, connection: object | None = None
    ) -> Sequence[Handle]: ...

    def enqueue_plan_sync(
        self, plan: Plan, *, connection: object | None = None
    ) -> Sequence[Handle]: ...

    async def wait_for_outcomes(
        self, job_ids: Sequence[int], timeout: float | None = None
    ) -> dict[int, JobOutcome]: ...

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T: ...


class StepTask(Protocol):
    """What a signature needs of its task (``Task`` is one)."""

    @property
    def app(self) -> WorkflowApp: ...

    def prepare_call(
        self, args: Sequence[Any], kwargs: dict[str, Any], leading: int = 0
    ) -> NewJob: ...


class Composable:
    """What every part of a canvas can do: be chained with ``|``, and be enqueued."""

    def __or__(self, other: Canvas) -> Chain:
        return chain(self, other)  # type: ignore[arg-type]

    async def aenqueue(self) -> WorkflowHandle:
        """Write every job of the workflow in one transaction, all or none."""
        return await Workflow(self).aenqueue()  # type: ignore[arg-type]

    def enqueue(self) -> WorkflowHandle:
        """``aenqueue`` for code without an event loop."""
        return Workflow(self).enqueue()  # type: ignore[arg-type]

    def using(self, *, connection: object | None = None) -> Workflow:
        """This workflow, written in the caller's transaction on ``connection`` (asyncpg,
        psycopg async or sqlite3)."""
        return Workflow(self, connection)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Signature(Composable):
    """A task and the arguments of one call to it, not yet enqueued (``task.s(...)``)."""

    task: StepTask
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    immutable: bool = False
    """Takes no result from the steps before it (``task.si(...)``)."""

    def set(self, **options: Any) -> Signature:
        """The same call with the task's enqueue options changed (``task.using(...)``'s)."""
        using: Callable[..., StepTask] = getattr(self.task, "using")  # noqa: B009 (Task's)
        return dataclasses.replace(self, task=using(**options))


@dataclass(frozen=True)
class Chain(Composable):
    """Steps one after the other, each given the result of the one before."""

    steps: tuple[Canvas, ...]


@dataclass(frozen=True)
class Group(Composable):
    """Steps side by side; what follows a group gets the list of their results."""

    members: tuple[Canvas, ...]


@dataclass(frozen=True)
class Chord(Composable):
    """A group, then ``body`` once with the list of the group's results."""

    header: Group
    body: Canvas


Canvas = Signature | Chain | Group | Chord


def chain(*steps: Canvas) -> Chain:
    """``chain(a.s(1), b.s(), c.s())``: a, then b with a's result first, then c with b's."""
    flat: list[Canvas] = []
    for step in steps:
        _check_canvas("chain", step)
        flat.extend(step.steps if isinstance(step, Chain) else (step,))
    require(bool(flat), "chain", "()", "needs at least one step")
    return Chain(tuple(flat))


def group(*members: Canvas) -> Group:
    """``group(a.s(1), a.s(2))``: side by side; ``group(iterable)`` works too."""
    if len(members) == 1 and not isinstance(members[0], Signature | Chain | Group | Chord):
        members = tuple(members[0])  # group(sig for ...) as Celery allows
    for member in members:
        _check_canvas("group", member)
    require(bool(members), "group", "()", "needs at least one member")
    return Group(tuple(members))


def chord(header: Group | Sequence[Canvas], body: Canvas) -> Chord:
    """``chord(group(...), callback.s())``: the callback once, with every result in order."""
    made = header if isinstance(header, Group) else group(*header)
    _check_canvas("chord", body)
    return Chord(made, body)


def _check_canvas(where: str, part: object) -> None:
    if not isinstance(part, Signature | Chain | Group | Chord):
        raise ConfigurationError(
            f"{where}: {part!r} is not a signature (task.s(...)), chain, group or chord"
        )


# -- compiling -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Builder:
    """A plan as it is built: nodes, and each node's depth (for the limit)."""

    nodes: list[Node] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    app: object | None = None
    """The app of the first signature: every other must be of it (one database)."""

    def add(self, part: Canvas, before: list[int], listed: bool) -> tuple[list[int], bool]:
        """Add ``part`` after the nodes ``before`` (whose results come as a list when
        ``listed``); return its exit nodes and whether what follows gets a list."""
        if isinstance(part, Signature):
            return [self._signature(part, before, listed)], False
        if isinstance(part, Chain):
            exits, as_list = before, listed
            for step in part.steps:
                exits, as_list = self.add(step, exits, as_list)
            return exits, as_list
        if isinstance(part, Chord):
            exits, as_list = self.add(part.header, before, listed)
            return self.add(part.body, exits, as_list)
        exits = []
        for member in part.members:
            member_exits, _ = self.add(member, before, listed)
            exits.extend(member_exits)
        return exits, True

    def _signature(self, sig: Signature, before: list[int], listed: bool) -> int:
        if len(self.nodes) >= MAX_WORKFLOW_JOBS:
            raise ConfigurationError(
                f"workflow: more than {MAX_WORKFLOW_JOBS} jobs in one enqueue; enqueue it in "
                "parts (a later part may depends_on the first's handles)"
            )
        require(
            len(before) <= MAX_PARENTS,
            "workflow",
            f"{len(before)} parents",
            f"a step may wait for at most {MAX_PARENTS} others (a group that wide)",
        )
        task = sig.task
        if self.app is None:
            self.app = task.app
        elif task.app is not self.app:
            raise ConfigurationError(
                f"workflow: task {getattr(task, 'name', task)!r} is of another app than the "
                "workflow's first step; "
                "a workflow's jobs are written to one app's database (register the task on "
                "that app)"
            )
        mode: str | None = None
        if before and not sig.immutable:
            mode = "all" if listed else "previous"
        job = task.prepare_call(sig.args, sig.kwargs, leading=1 if mode else 0)
        depth = 1 + max((self.depth[i] for i in before), default=0)
        if depth > MAX_WORKFLOW_DEPTH:
            raise ConfigurationError(
                f"workflow: deeper than {MAX_WORKFLOW_DEPTH} steps; split it (a later part "
                "may depends_on the first's last handle)"
            )
        self.nodes.append(
            Node(job, tuple(before), mode, job.on_parent_failure if before else "cancel")
        )
        self.depth.append(depth)
        return len(self.nodes) - 1


def compile_plan(
    part: Canvas, options: dict[str, Any] | None = None
) -> tuple[Plan, list[int], bool]:
    """The plan of ``part``; its exit nodes, and whether its result is their list."""
    _check_canvas("workflow", part)
    builder = _Builder()
    exits, listed = builder.add(part, [], False)
    return Plan(tuple(builder.nodes)), exits, listed or len(exits) > 1


def _first_task(part: Canvas) -> StepTask:
    while not isinstance(part, Signature):
        if isinstance(part, Chain):
            part = part.steps[0]
        elif isinstance(part, Chord):
            part = part.header
        else:
            part = part.members[0]
    return part.task


# -- enqueueing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workflow:
    """A canvas bound for enqueue: ``workflow(chain(...)).aenqueue()``; ``chain(...)``,
    ``group(...)`` and ``chord(...)`` have these methods themselves."""

    canvas: Canvas
    connection: object | None = None

    def using(self, *, connection: object | None = None) -> Workflow:
        """The same workflow, written in the caller's transaction on ``connection``."""
        return dataclasses.replace(self, connection=connection)

    async def aenqueue(self) -> WorkflowHandle:
        """Write every job of the workflow, all or none."""
        app = _first_task(self.canvas).app
        plan, exits, listed = compile_plan(self.canvas)
        handles = await app.enqueue_plan(plan, connection=self.connection)
        return WorkflowHandle(list(handles), [handles[i] for i in exits], listed, app)

    def enqueue(self) -> WorkflowHandle:
        """``aenqueue`` for code without an event loop."""
        app = _first_task(self.canvas).app
        plan, exits, listed = compile_plan(self.canvas)
        handles = app.enqueue_plan_sync(plan, connection=self.connection)
        return WorkflowHandle(list(handles), [handles[i] for i in exits], listed, app)


@dataclass(slots=True)
class WorkflowHandle:
    """What a workflow's enqueue returns: every job's handle, and a way to await its end."""

    handles: list[Handle]
    """One per job, in the order the workflow lists them."""
    last: list[Handle]
    """The jobs whose results are the workflow's (a chain's last link, a group's members)."""
    listed: bool
    """Whether its result is the list of ``last``'s results (a group), or one result."""
    app: WorkflowApp = field(repr=False)

    @property
    def id(self) -> int:
        """The id of the job whose result is the workflow's (the first of a group's)."""
        return self.last[0].id

    @property
    def ids(self) -> list[int]:
        return [h.id for h in self.handles]

    async def result(self, timeout: float | None = None) -> Any:
        """The workflow's result once its last jobs succeeded: one value, or the list of a
        group's. Raises as ``JobHandle.result`` does (JobFailed, JobCancelled, TimeoutError)."""
        ids = [h.id for h in self.last]
        outcomes = await self.app.wait_for_outcomes(ids, timeout)
        values = [h.rebuilt(unwrap(outcomes[h.id])) for h in self.last]
        return values if self.listed else values[0]

    def result_sync(self, timeout: float | None = None) -> Any:
        """``result`` for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.app._run_sync(self.result(timeout))
        raise BlockingCallInLoop(
            "workflow.result_sync() inside a running event loop would block it; use await "
            "handle.result()"
        )
