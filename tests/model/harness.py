"""The real side of the semantics test: the tasks a real app runs, and the recorder their
bodies report to.

Every task body does what its enqueue's script says for this run (succeed, fail, fail
permanently, time out, cancel itself, ``Retry``, ``Snooze``), and records what it saw and did
as events (``start``, ``end``, ``batch``), in the order the worker ran them; the state machine
replays the events through the model, which judges each one. A keyed job holds its slot a few
milliseconds so that a claim that broke its key's cap would show as two bodies at once.

For a killed worker the recorder makes the first body to get there hang (at its start, or at
its end, after its steps and waits, before its outcome) while the test takes its lease away.
Then the test either force-stops that worker (the cancellation goes straight through the body:
no end is recorded) or lets the body go on as a zombie: what it does then is recorded as
``zombie`` events, which change nothing (its lease is gone, its writes must be fenced).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from collections.abc import Callable
from typing import Any

import skiplock
from skiplock import Cancel, Retry, RetryPolicy, SignalTimeout, Snooze, current_job
from skiplock._outcomes import Parked

from .model_jobs import BACKOFF_S, RETRY_S, SNOOZE_S, WAIT_S, result_of

Event = tuple[Any, ...]
HOLD_KEYED_S = 0.01
"""How long a keyed job holds its key's slot: long enough for a second claim to overlap."""
TIMEOUT_S = 0.15
"""The real-time ``timeout`` of a job whose script times out (it sleeps past it)."""


_ZOMBIE: contextvars.ContextVar[bool] = contextvars.ContextVar("model_zombie", default=False)
"""Set in a run that hung while its worker "died" and was let go on: its lease is gone."""


class PermanentError(Exception):
    """Listed in every task's ``permanent=``: no retry."""


class Recorder:
    """What the task bodies did, and the scripts they follow."""

    def __init__(self, app: skiplock.App) -> None:
        self.app = app
        self.reset()

    def reset(self) -> None:
        """Forget the example before (its tokens are used again)."""
        self.events: list[Event] = []
        self.scripts: dict[str, list[str]] = {}
        self.holds: set[str] = set()
        """Tokens of keyed jobs (they hold their slot HOLD_KEYED_S)."""
        self.runs: collections.Counter[str] = collections.Counter()
        self.step_calls: collections.Counter[tuple[str, int]] = collections.Counter()
        self.zombie_calls: collections.Counter[tuple[str, int]] = collections.Counter()
        """Step calls made by zombies (a step whose result could not be stored runs again)."""
        self.hang_at: str | None = None
        self.hung = asyncio.Event()
        self.gate = asyncio.Event()
        self.hung_ids: list[int] = []

    def arm_hang(self, where: str) -> None:
        """The next body to reach ``where`` hangs until ``gate`` opens (a kill's victim)."""
        self.hang_at, self.hung_ids = where, []
        self.hung.clear()
        self.gate.clear()

    def take(self) -> list[Event]:
        taken, self.events = self.events, []
        return taken

    # -- what a body does --------------------------------------------------------------------

    async def begin(self, token: str, seen: Any = None) -> str:
        """Record the start; the step this run takes; hang here if a kill asks so."""
        job = current_job()
        self.events.append(("start", job.id, token, job.attempt, seen))
        self.runs[token] += 1
        script = self.scripts.get(token, [])
        run = self.runs[token]
        await self.hang("start")
        if token in self.holds:
            await asyncio.sleep(HOLD_KEYED_S)
        return script[run - 1] if run <= len(script) else "ok"

    async def act(self, step: str, value: Any) -> Any:
        """End the run as ``step`` says: return ``value``, or raise."""
        await self.hang("end")
        job_id = current_job().id
        if step == "timeout":
            try:
                await asyncio.sleep(TIMEOUT_S * 20)
            except asyncio.CancelledError:
                self.end(job_id, "timeout")
                raise
            step = "not timed out"  # the model names the difference
        self.end(job_id, step, value if step == "ok" else None)
        if step == "ok":
            return value
        raise _raised(step)

    def end(self, job_id: int, outcome: str, value: Any = None) -> None:
        kind = "zombie" if _ZOMBIE.get() else "end"  # a zombie's end changes nothing
        self.events.append((kind, job_id, outcome, value))

    async def hang(self, where: str) -> None:
        if self.hang_at != where:
            return
        job_id = current_job().id
        self.hang_at = None  # one victim
        self.hung_ids.append(job_id)
        self.hung.set()
        await self.gate.wait()  # or until its worker is force-stopped: no end is recorded
        _ZOMBIE.set(True)

    def side(self, token: str, i: int) -> str:
        """A step's effect outside the database (a card charged): counted."""
        self.step_calls[(token, i)] += 1
        if _ZOMBIE.get():
            self.zombie_calls[(token, i)] += 1
        return f"{token}:{i}"


def _raised(step: str) -> BaseException:
    if step == "fail":
        return RuntimeError("scripted failure")
    if step == "permanent":
        return PermanentError("scripted permanent failure")
    if step == "cancel":
        return Cancel("scripted cancel")
    if step == "retry":
        return Retry(in_s=RETRY_S, reason="scripted retry")
    if step == "snooze":
        return Snooze(SNOOZE_S)
    return RuntimeError(step)


def register(app: skiplock.App, rec: Recorder) -> dict[str, skiplock.Task[..., Any]]:
    """The machine's tasks on ``app``, by name."""
    options: dict[str, Any] = {
        "retry": RetryPolicy(base_s=BACKOFF_S, cap_s=BACKOFF_S, jitter=False),
        "permanent": (PermanentError,),
    }

    async def plain(token: str) -> Any:
        return await rec.act(await rec.begin(token), result_of(token))

    async def link(prev: Any, token: str) -> Any:
        return await rec.act(await rec.begin(token, prev), result_of(token))

    async def body(results: list[Any], token: str) -> Any:
        return await rec.act(await rec.begin(token, results), result_of(token))

    async def callback(batch_id: int, token: str) -> Any:
        step = await rec.begin(token, batch_id)
        info = await app.batch_info(batch_id)
        rec.events.append(("batch", current_job().id, batch_id, dict(info.counts)))
        return await rec.act(step, result_of(token))

    async def child(token: str) -> Any:
        seen = await current_job().parent_results()
        return await rec.act(await rec.begin(token, seen), result_of(token))

    async def waiter(token: str, waits: int) -> Any:
        step = await rec.begin(token)
        got = await _waits(rec, waits)
        return await rec.act(step, [token, *got])

    async def stepper(token: str, steps: int, by_order: bool) -> Any:
        step = await rec.begin(token)
        job, values = current_job(), []
        for i in range(steps):
            name = "charge" if by_order else f"charge-{i}"
            values.append(await job.step(name, rec.side, token, i))
        return await rec.act(step, values)

    bodies: dict[str, Callable[..., Any]] = {
        "work": plain,
        "work_b": plain,
        "weighted": plain,
        "link": link,
        "body": body,
        "callback": callback,
        "child": child,
        "waiter": waiter,
        "stepper": stepper,
    }
    return {name: app.task(name=name, **options)(fn) for name, fn in bodies.items()}


async def _waits(rec: Recorder, waits: int) -> list[Any]:
    """``wait_for("go")`` ``waits`` times, as a user's loop over a signal would."""
    job, got = current_job(), []
    for k in range(waits):
        try:
            got.append(await job.wait_for("go", timeout=WAIT_S))
        except SignalTimeout:
            got.append("timeout")
            break
        except Parked:
            rec.end(job.id, "park", k)
            raise
    return got
