"""The workflow sweep, kept going past one bad item.

Every worker's rescuer sweeps the workflows (``workflow_flows.sweep``): up to a thousand
parents whose release a crash left undone, children left at zero, parked jobs whose signal
came, waits past their timeout, in one transaction. One item the database refuses there (a
value over one of its limits, a trigger of the user's, a bug of ours) rolls the rest back with
it, at every sweep, in every worker: no release would ever happen again. So a sweep that fails
with anything but an outage is done again item by item, each in a transaction of its own; an
item that fails is logged with its reason and left for the next sweep, and every other item
goes on. An outage still ends the sweep (``BackendUnavailable``: the rescuer reports it and
tries again later).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import BackendUnavailable
from . import workflow_flows as wf
from .flows import Flow
from .workflow_plan import SweepResult

log = logging.getLogger("skiplock.workflow")

RunFlow = Callable[[Callable[[], Flow[Any]]], Awaitable[Any]]
"""Runs a flow (made anew by the callable, for each attempt) in a transaction of its own."""


async def sweep(run: RunFlow, most: int = wf.SWEEP_MOST) -> SweepResult:
    """The sweep in one transaction; item by item (``by_item``) if that fails."""
    try:
        result: SweepResult = await run(lambda: wf.sweep(most))
        return result
    except BackendUnavailable:
        raise
    except Exception as exc:  # one item's fault must not hold the others back
        log.warning("workflow sweep failed (%s); sweeping its items one by one", exc)
    return await by_item(run, most)


async def by_item(run: RunFlow, most: int = wf.SWEEP_MOST) -> SweepResult:
    """The sweep's items each in a transaction of its own: a failing one is logged and left
    for the next sweep."""
    result = SweepResult()
    parents, stranded = await run(lambda: wf.sweep_look(most))
    for parent in parents:
        what = f"the release of job {parent}'s children"
        result.released += await _item(run, functools.partial(wf.release, [parent]), what)
    for child in stranded:
        what = f"the release of job {child}"
        result.released += await _item(run, functools.partial(wf.ready, [child]), what)
    signalled = functools.partial(wf.signalled, most)
    result.released += await _item(run, signalled, "the parked jobs whose signal came")
    expired = functools.partial(wf.expire, most)
    result.timed_out = await _item(run, expired, "the waits past their timeout")
    return result


async def _item(run: RunFlow, make: Callable[[], Flow[list[int]]], what: str) -> list[int]:
    try:
        return list(await run(make))
    except BackendUnavailable:
        raise
    except Exception:
        log.exception("workflow sweep: %s failed; the next sweep tries it again", what)
        return []
