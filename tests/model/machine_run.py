"""The state machine's worker rules: a drain (a burst worker in this process), a worker killed
with a job in hand (its supervisor releases its leases; the zombie's late write is fenced), a
worker's maintenance pass, and the key-weight turn at ``concurrency=1``. Each replays the
events the task bodies recorded through the model, then checks that the worker left no job it
should have run."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from skiplock import Worker

from . import checks
from .harness import Event
from .machine_base import MachineBase
from .model import Divergence
from .model_jobs import FINAL, SUCCEEDED

DRAIN_LIMIT_S = 60.0
"""A drain that has not ended by then is stuck (a burst worker that never sees its end)."""
LEASE_PASSED_S = 61
"""Past any lease here (the default 30 s + 30 s margin; a timeout of 0.15 s + 30 s), and short
of a wait's timeout (99.5 s), so that no wait parked in the rule times out."""
WEIGHTED = {"wA": (3, 9), "wB": (1, 6)}
"""The weight rule's keys: (key_weight, jobs)."""


class Runs(MachineBase):
    @rule()
    def drain(self) -> None:
        self.drain_now()

    def drain_now(self) -> None:
        if self.model.drain_expires_waits:
            self.model.expire_waits()
        try:
            self.run(asyncio.wait_for(self.app.drain(), DRAIN_LIMIT_S))
        except TimeoutError:
            raise Divergence(f"app.drain() did not end in {DRAIN_LIMIT_S:g} s") from None
        self.replay(self.rec.take())
        self.nothing_left_ready(None)

    def replay(self, events: list[Event]) -> None:
        for event in events:
            kind, *rest = event
            if kind == "start":
                self.model.start(*rest)
            elif kind == "end":
                self.model.end(*rest)
            elif kind == "batch":
                self.batch_seen(*rest)
            elif kind == "killed":
                self.model.killed(*rest)
            elif kind == "advance":
                self.model.now += rest[0]
            # a "zombie" event is what a body did after its lease was taken: nothing

    def nothing_left_ready(self, queues: set[str] | None) -> None:
        if left := self.model.ready(queues):
            names = [f"{j.id} ({j.kind} {j.token})" for j in left]
            raise Divergence(f"the worker ended with jobs ready to run left behind: {names}")

    def batch_seen(self, job_id: int, batch_id: int, counts: dict[str, int]) -> None:
        """What a callback's ``app.batch_info`` showed when it ran: a complete batch (every
        member finished; for ``on_success``, every member succeeded)."""
        callback = self.model.jobs[job_id]
        batch = self.model.batches[batch_id]
        if any(self.model.jobs[m].person_retries for m in batch.members):
            return  # a requeued member may be live again: the docs do not say
        unfinished = {s: n for s, n in counts.items() if s not in FINAL | {"gone"} and n}
        members = batch.members
        if not checks.CHECK_BATCH_COUNTS_KEEP_PRUNED:
            members = [m for m in members if not self.model.jobs[m].pruned]
        if unfinished or sum(counts.values()) != len(members):
            raise Divergence(f"batch {batch_id}'s callback {job_id} ran over {counts}")
        failed = {s: n for s, n in counts.items() if s != SUCCEEDED and n}
        if callback.callback == (batch_id, "success") and failed:
            raise Divergence(f"batch {batch_id}'s on_success ran though {failed}")

    # -- a killed worker ---------------------------------------------------------------------

    @rule(
        hang_at=st.sampled_from(["start", "end"]),
        how=st.sampled_from(["released", "expired"]),
        zombie=st.sampled_from(["stopped", "finishes"]),
    )
    def kill_a_worker(self, hang_at: str, how: str, zombie: str) -> None:
        """A worker takes one job to ``hang_at`` and dies there: its supervisor releases its
        leases (``released``: ``app.release_worker``), or they expire and another worker's
        rescuer takes them back (``expired``: the clock passes the lease). Then the process
        is gone for good (``stopped``), or was only frozen and its job runs on to its end
        (``finishes``): either way nothing it does after may be written. A worker ends the
        waits whose timeout passed (its wait timer): the sweep does that first here, and the
        lease is taken back by release where moving the clock would time out another."""
        self.maintenance()
        if how == "expired" and self.model.waits_due_within(LEASE_PASSED_S):
            how = "released"
        self.run(self._kill(hang_at, how, zombie))
        self.replay(self.rec.take())

    async def _kill(self, hang_at: str, how: str, zombie: str) -> None:
        rec = self.rec
        rec.arm_hang(hang_at)
        worker = Worker(
            self.app,
            concurrency=1,
            prefetch=0,
            poll_interval_s=0.05,
            maintenance_interval_s=3600,
            scheduler=False,
        )
        claimed = worker.signals.claimed.arm()
        flushed = worker.signals.flushed.arm()
        beats = worker.signals.heartbeat.arm()
        running = asyncio.create_task(worker.run())
        try:
            took: set[int] = set()
            await asyncio.wait_for(_hung_or_idle(rec.hung, claimed, took), DRAIN_LIMIT_S)
            if not rec.hung_ids:
                return
            victim = rec.hung_ids[0]
            for ids in claimed.drain():
                took.update(ids)
            await _others_written(took - {victim}, flushed)
            taken = await (
                self._released(worker.id) if how == "released" else self._expired(worker.id, beats)
            )
            if taken != [victim]:
                raise Divergence(f"the dead worker held job {victim}; {how}: {taken}")
            rec.events.append(("killed", victim))
            if zombie == "finishes":
                rec.gate.set()
                await _until_written(flushed, victim)
        finally:
            rec.hang_at = None
            if zombie == "finishes":
                rec.gate.set()
                worker.request_stop()
            else:
                worker.request_stop()
                worker.request_stop()  # the second stop: no grace for the hung body
            await asyncio.wait_for(running, DRAIN_LIMIT_S)

    async def _released(self, worker_id: str) -> list[int]:
        return await self.app.release_worker(worker_id)

    async def _expired(self, worker_id: str, beats: Any) -> list[int]:
        """Move the clock past the lease, then run a rescuer's reclaim. Should the dying
        worker's heartbeat (real time, every few seconds) have renewed the lease meanwhile,
        its supervisor releases it instead: moving the clock again could time out a wait
        that parked in this rule, which the dying worker's wait timer would then end."""
        backend = await self.app.backend()
        beats.drain()
        self.clock.advance(LEASE_PASSED_S)
        self.rec.events.append(("advance", LEASE_PASSED_S))  # the model's clock, in order
        taken = await backend.job_reclaim_expired()
        if not taken and beats.drain():
            return await self.app.release_worker(worker_id)
        return list(taken)

    # -- maintenance -------------------------------------------------------------------------

    @rule()
    def maintenance(self) -> None:
        """What each worker's rescuer runs every ``maintenance_interval_s``: expired leases
        back to pending (none here: no job is held between steps), then the workflow sweep
        (waits past their timeout; releases a crash left undone)."""
        backend = self.run(self.app.backend())
        if reclaimed := self.run(backend.job_reclaim_expired()):
            raise Divergence(f"leases expired though no worker held a job: {reclaimed}")
        self.run(backend.workflow_sweep())
        self.model.sweep()
        self.database_matches_model()
        if stranded := self.model.stranded():
            raise Divergence(f"waiting jobs no event can release: {stranded}")

    # -- weighted turns ----------------------------------------------------------------------

    @precondition(lambda self: checks.CHECK_KEY_WEIGHTS_IN_STEADY_STATE and not self.weighed)
    @rule(again=st.booleans())
    def weighted_turns(self, again: bool) -> None:
        """docs/guides/keys.md: ``key_weight=3`` starts three of its jobs to another key's
        one while both have ready work ("acme, acme, acme, bob, acme, ..."), "in every
        claim's batch and in the steady state", here at ``concurrency=1``, where every claim
        is a steady state's claim of one slot. Two new keys; ``again``, the same two back
        after both ran out of work ("a key cannot save up turns by going idle"). The sweep
        first ends the waits whose timeout passed (the worker's wait timer would)."""
        self.maintenance()
        self.weighed = True
        keys = {f"{key}-{self.world.examples}": spec for key, spec in WEIGHTED.items()}
        self._weighed_round(keys, "new keys")
        if again and checks.CHECK_KEY_TURNS_AFTER_IDLE:
            self._weighed_round(keys, "the same keys back after idling")

    def _weighed_round(self, keys: dict[str, tuple[int, int]], what: str) -> None:
        tokens: dict[str, list[str]] = {}
        jobs: list[Any] = []
        for key, (weight, n) in keys.items():
            task = self.tasks["weighted"].using(
                queue="weights", concurrency_key=key, key_weight=weight
            )
            tokens[key] = [self.token() for _ in range(n)]
            jobs += [task.prepare(t) for t in tokens[key]]
        handles = self.run(self.app.enqueue_many(jobs))
        every = [(key, t) for key in keys for t in tokens[key]]
        for handle, (key, token) in zip(handles, every, strict=True):
            self.add(handle.id, "weighted", "weighted", token, [], queue="weights", ckey=key)
        worker = Worker(
            self.app,
            concurrency=1,
            prefetch=0,
            queues=("weights",),
            poll_interval_s=0.05,
            scheduler=False,
        )
        self.run(asyncio.wait_for(worker.run(burst=True), DRAIN_LIMIT_S))
        events = self.rec.take()
        self.replay(events)
        self.nothing_left_ready({"weights"})
        heavy_key = next(iter(keys))
        started = ["A" if e[2] in tokens[heavy_key] else "B" for e in events if e[0] == "start"]
        if started[:8].count("A") != 6:
            order = "".join(started)
            raise Divergence(f"weight 3 against 1, {what}, started {order}: A {started[:8]}")


async def _until_written(flushed: Any, job_id: int) -> None:
    """Until the worker wrote (or was refused) the zombie's outcome."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(10):
            while job_id not in await flushed.wait():
                pass


async def _others_written(others: set[int], flushed: Any) -> None:
    """Until the dying worker wrote the outcome of every other job it claimed. A body that
    ends frees its slot before its outcome is flushed, so the worker may claim the next job,
    and hang on it, while the last outcome is still on its way; killed then, the worker would
    give that job back too: a run again the docs allow (at least once) but the model, told of
    one victim, would read as a lost outcome."""
    written: set[int] = set()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(10):
            while others - written:
                written.update(await flushed.wait())


async def _hung_or_idle(hung: asyncio.Event, claimed: Any, took: set[int]) -> None:
    """Until a body hangs, or a claim of the dying worker comes back empty (nothing to run);
    ``took`` gathers the ids the worker claimed."""
    while not hung.is_set():
        hang = asyncio.ensure_future(hung.wait())
        claim = asyncio.ensure_future(claimed.wait())
        done, _ = await asyncio.wait([hang, claim], return_when=asyncio.FIRST_COMPLETED)
        hang.cancel()
        if claim in done:
            took.update(claim.result())
        if claim in done and not claim.result() and not hung.is_set():
            return
        claim.cancel()
