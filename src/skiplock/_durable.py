"""Durable execution inside a running job: steps that run once, waits for a signal, and the
parents' results (``current_job().step``, ``.wait_for``, ``.parent_results``).

A job that parks or crashes runs again from the top; what it did is not lost, because each
step's result is stored (under the job's lease) the moment it returns, and a step already
stored returns its stored result instead of running again. So code before a ``wait_for`` that
must not repeat goes in a step. A wait parks the job (``Parked`` ends the attempt: no lease,
no slot) until ``app.signal`` or the timeout makes it pending again; the next run's
``wait_for`` finds the signal (or the timeout) stored and returns (or raises) at once.

Steps and waits are keyed by call order, as Temporal and DBOS replay a workflow: a step is
its name and how many steps of that name the run made before it, so ``[await
job.step("charge", charge, i) for i in items]`` charges each item once, and a re-run returns
the stored results in the same order. A job's signals are a mailbox per name, in the order
they came; the n-th ``wait_for(name)`` of a run takes the n-th (a timed-out wait's place is
its timeout), so ``while (msg := await job.wait_for("next")) != "stop"`` takes each message
once, however many times the job parks and runs again.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from ._config import require
from ._outcomes import Parked
from ._payload import encode_result
from ._workflow_records import ReceivedSignal, StoredSignal
from .errors import BlockingCallInLoop, LeaseLost, SignalTimeout

T = TypeVar("T")

MAX_NAME_CHARS = 200
"""The longest step or signal name."""
MAX_WAIT_S = 366 * 86400.0
"""The longest a job may stay parked on a signal (and the wait of ``timeout=None``)."""


@dataclass(frozen=True, slots=True)
class WorkflowStepGetParams:
    """The ``seq``-th durable step named ``name`` of a job, to read."""

    job_id: int
    name: str
    seq: int


@dataclass(frozen=True, slots=True)
class WorkflowStepPutParams:
    """A durable step's result to store under the job's lease ``token``."""

    job_id: int
    token: str
    name: str
    seq: int
    result_json: str | None


@dataclass(frozen=True, slots=True)
class WorkflowSignalTakeParams:
    """Entry ``seq`` of a job's mailbox ``name`` to take."""

    job_id: int
    name: str
    seq: int


@dataclass(frozen=True, slots=True)
class WorkflowWaitPrepareParams:
    """The signal (entry ``seq`` of mailbox ``name``) a job running under ``token`` parks on."""

    job_id: int
    token: str
    name: str
    seq: int


class DurableStore(Protocol):
    """What durable execution needs of a backend (every Backend has these; the records
    above are their params, ``_backends/workflow_params.py`` names them with the others)."""

    async def workflow_step_get(self, params: WorkflowStepGetParams) -> tuple[bool, str | None]: ...

    async def workflow_step_put(self, params: WorkflowStepPutParams) -> bool: ...

    async def workflow_signal_take(
        self, params: WorkflowSignalTakeParams
    ) -> StoredSignal | None: ...

    async def workflow_wait_prepare(self, params: WorkflowWaitPrepareParams) -> bool: ...

    async def workflow_parent_results(
        self, job_id: int
    ) -> list[tuple[int, str | None, str | None]]: ...


def check_name(option: str, name: object) -> str:
    """A step's or a signal's name: a non-empty str of at most MAX_NAME_CHARS, no NUL."""
    require(isinstance(name, str), option, name, "must be a str")
    assert isinstance(name, str)
    require(
        0 < len(name) <= MAX_NAME_CHARS and "\x00" not in name,
        option,
        name[:50],
        f"must be 1 to {MAX_NAME_CHARS} characters, without NUL",
    )
    return name


def check_wait(timeout: float | timedelta | None) -> float:
    """A wait's timeout in seconds: finite, above 0, at most MAX_WAIT_S (None: that)."""
    if timeout is None:
        return MAX_WAIT_S
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    require(
        isinstance(seconds, int | float) and not isinstance(seconds, bool),
        "timeout",
        timeout,
        "must be seconds or a timedelta",
    )
    require(
        math.isfinite(seconds) and 0 < seconds <= MAX_WAIT_S,
        "timeout",
        timeout,
        f"must be above 0 and at most {MAX_WAIT_S:.0f} seconds (366 days)",
    )
    return float(seconds)


def _decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@dataclass(frozen=True, slots=True)
class DurableSource:
    """Where a worker's jobs keep their steps and signals: its backend, the largest result it
    stores, and the event loop the backend lives on (a sync task's thread calls it there)."""

    store: DurableStore
    max_result_bytes: int
    loop: asyncio.AbstractEventLoop


class Durable:
    """One running attempt's durable operations, fenced by its lease token. It counts the
    steps and waits of each name this run made: the count is each one's key."""

    __slots__ = ("job_id", "loop", "max_result_bytes", "steps", "store", "task", "token", "waits")

    def __init__(self, source: DurableSource, job_id: int, token: str, task: str) -> None:
        self.store, self.job_id, self.token = source.store, job_id, token
        self.task, self.max_result_bytes = task, source.max_result_bytes
        self.loop = source.loop
        self.steps: dict[str, int] = {}
        """Steps of each name this run called so far (the next one's key is one more)."""
        self.waits: dict[str, int] = {}
        """Waits for each signal name this run made so far (the next takes entry one more)."""

    @staticmethod
    def _next(counts: dict[str, int], name: str) -> int:
        """The key of this run's next call by ``name`` (counted at the call, before any
        await, so calls started in one order keep that order)."""
        counts[name] = seq = counts.get(name, 0) + 1
        return seq

    def _step(self, name: str, seq: int) -> WorkflowStepGetParams:
        """The read of this job's ``seq``-th step named ``name``."""
        return WorkflowStepGetParams(self.job_id, name, seq)

    def _on_loop(self, coro: Coroutine[Any, Any, T], call: str) -> T:
        """Run ``coro`` on the worker's loop from a sync task's thread, and wait for it."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            coro.close()
            raise BlockingCallInLoop(
                f"job {self.job_id}: current_job().{call}_sync() on an event loop would block "
                f"it; use await current_job().{call}(...)"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def step_sync(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        check_name("name", name)
        seq = self._next(self.steps, name)
        found, text = self._on_loop(self.store.workflow_step_get(self._step(name, seq)), "step")
        if found:
            return _decode(text)
        value = fn(*args, **kwargs)
        return self._on_loop(self._keep(name, seq, value), "step")

    def wait_for_sync(
        self, name: str, timeout: float | timedelta | None, with_sender: bool = False
    ) -> Any:
        return self._on_loop(self.wait_for(name, timeout, with_sender), "wait_for")

    def parent_results_sync(self) -> dict[int, Any]:
        return self._on_loop(self.parent_results(), "parent_results")

    async def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        check_name("name", name)
        seq = self._next(self.steps, name)
        found, text = await self.store.workflow_step_get(self._step(name, seq))
        if found:
            return _decode(text)
        if inspect.iscoroutinefunction(fn):
            value = await fn(*args, **kwargs)
        else:
            value = await asyncio.to_thread(fn, *args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
        return await self._keep(name, seq, value)

    async def _keep(self, name: str, seq: int, value: Any) -> Any:
        """Store a step's result under the lease; the stored one if another holder stored
        first; LeaseLost if neither."""
        stored = None if value is None else encode_result(self.task, value, self.max_result_bytes)
        put = WorkflowStepPutParams(self.job_id, self.token, name, seq, stored)
        if not await self.store.workflow_step_put(put):
            found, text = await self.store.workflow_step_get(self._step(name, seq))
            if not found:
                raise LeaseLost(
                    f"job {self.job_id}: step {name!r} ran, but the job's lease is gone; the "
                    "worker that holds it now runs the step"
                )
            return _decode(text)  # stored meanwhile by the lease's holder: its result counts
        return value

    async def wait_for(
        self, name: str, timeout: float | timedelta | None, with_sender: bool = False
    ) -> Any:
        """The payload of the signal this wait takes (``with_sender``: a ReceivedSignal)."""
        check_name("name", name)
        seconds = check_wait(timeout)
        require(isinstance(with_sender, bool), "with_sender", with_sender, "must be a bool")
        seq = self._next(self.waits, name)
        seen = await self.store.workflow_signal_take(
            WorkflowSignalTakeParams(self.job_id, name, seq)
        )
        if seen is not None:
            if seen.kind == "signal":
                payload = _decode(seen.payload_json)
                if with_sender:
                    return ReceivedSignal(name, payload, seen.sender, seen.at)
                return payload
            raise SignalTimeout(
                f"job {self.job_id}: no signal {name!r} came before the wait's timeout",
                name=name,
            )
        park = WorkflowWaitPrepareParams(self.job_id, self.token, name, seq)
        if not await self.store.workflow_wait_prepare(park):
            raise LeaseLost(f"job {self.job_id}: the lease is gone; it cannot park on {name!r}")
        raise Parked(name, seconds)

    async def parent_results(self) -> dict[int, Any]:
        rows = await self.store.workflow_parent_results(self.job_id)
        return {parent: _decode(result) for parent, state, result in rows if state == "succeeded"}


def signal_payload(name: str, payload: Any, max_bytes: int) -> str | None:
    """A signal's payload as strict JSON (checked as a result is), or None."""
    if payload is None:
        return None
    subject = f"signal {name!r}: its payload"
    return encode_result("signal", payload, max_bytes, subject=subject, limit="max_payload_bytes")
