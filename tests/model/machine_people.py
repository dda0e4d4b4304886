"""The state machine's rules for what people and time do: cancel, requeue and discard a job,
signal a waiting one, close or grow a batch, prune, and let the pinned clock move; and, at
each example's end, the settling that runs everything out and finds what stayed stranded."""

from __future__ import annotations

import contextlib

from hypothesis import strategies as st
from hypothesis.stateful import rule

import skiplock
from skiplock import JobFilter

from . import checks
from .machine_enqueue import PICK, SCRIPT
from .machine_run import Runs
from .model import Divergence, Job
from .model_jobs import CANCELLED, DEAD, FINAL, PENDING, RUNNING


class _AddFailed(Exception):
    """What the code in a block adding to a batch raises."""


RETRYABLE = {"work", "keyed", "ordered", "weighted"}
"""Kinds a person requeues here (and cancelled chain links and chord bodies, by ``retry``'s
``link``). Waiters and steppers are left out (whether a requeue keeps their mailbox and
steps, the docs do not say), and so are batch callbacks and dependency children (which of
their parents' results a ``run`` or ``wait`` child needs again, the docs leave open)."""
AGES = [0.5, 45.5, 3600.5]
SETTLE_ROUNDS = 6
DAY_S = 86400
RETENTION_S = 31 * DAY_S
"""Past the default retentions (7 days finished, 30 days dead), plus a day."""


class People(Runs):
    @rule(pick=PICK)
    def cancel(self, pick: int) -> None:
        jobs = self.model.live()
        if not jobs:
            return
        job = jobs[pick % len(jobs)]
        expected = self.model.cancel(job)
        got = self.run(self.app.cancel_job(job.id)).value
        if got != expected:
            raise Divergence(
                f"cancel_job({job.id}) ({job.kind} {job.token}) left it {got}, not {expected}"
            )

    @rule(pick=PICK, link=st.booleans())
    def retry(self, pick: int, link: bool) -> None:
        """Requeue a job (a cancelled chain link or chord body, when ``link`` and there is
        one)."""
        jobs = [j for j in self.model.live() if j.kind in RETRYABLE or self._link(j)]
        links = [j for j in jobs if j.kind in ("link", "body")]
        jobs = links if link and links else jobs
        if not jobs:
            return
        job = jobs[pick % len(jobs)]
        if job.kind in ("link", "body"):
            self._retry_link(job)
            return
        others = (
            [h for h in self.model.holders(job.unique) if h.id != job.id]
            if (job.unique and job.state in FINAL)
            else []
        )
        try:
            got = self.run(self.app.retry_job(job.id))
        except skiplock.DuplicateJob:
            if not others:
                raise Divergence(
                    f"retry_job({job.id}): DuplicateJob, no other job holds {job.unique}"
                ) from None
            return
        if any(h.state in (PENDING, RUNNING) for h in others):
            raise Divergence(f"retry_job({job.id}) requeued it while {others} hold its key")
        if got != (self.model.retry(job) is not None):
            raise Divergence(f"retry_job({job.id}) ({job.state}) said {got}")

    def _link(self, job: Job) -> bool:
        parents = [self.model.jobs[p] for p in job.parents]
        return (
            checks.CHECK_RETRIED_LINK_TAKES_ITS_RESULT
            and job.kind in ("link", "body")
            and job.state == CANCELLED
            and not any(p.pruned for p in parents)
        )

    def _retry_link(self, job: Job) -> None:
        """A cancelled chain link or chord body requeued: refused, waiting for its parents
        again, or pending with their results; never run without them."""
        parents = {p: self.model.jobs[p].state for p in job.parents}
        expected = self.model.requeue_child(job)
        try:
            self.run(self.app.retry_job(job.id))
        except (skiplock.SkiplockError, ValueError) as exc:  # refused: it stays cancelled
            if expected != "refused":
                raise Divergence(
                    f"retry_job({job.id}) ({job.kind}, parents {parents}) refused: {exc}"
                ) from None
            return
        state = self.run(self.app.get_job(job.id)).state.value
        if state != expected:
            raise Divergence(
                f"retry_job({job.id}) ({job.kind}, parents {parents}) left it "
                f"{state}, not {expected}"
            )

    @rule(pick=PICK)
    def discard(self, pick: int) -> None:
        dead = [j for j in self.model.live() if j.state == DEAD]
        if not dead:
            return
        job = dead[pick % len(dead)]
        got = self.run(self.app.discard_dead(JobFilter(ids=(job.id,)), who="model"))
        if got != [job.id]:
            raise Divergence(f"discard_dead of dead job {job.id} discarded {got}")
        self.model.discard(job)

    @rule(
        pick=PICK,
        payload=st.integers(0, 99),
        live=st.booleans(),
        twice=st.booleans(),
        name=st.sampled_from(["go", "og"]),
    )
    def signal(self, pick: int, payload: int, live: bool, twice: bool, name: str) -> None:
        """Signal a waiter (one still to finish, when ``live`` and there is one), once or
        twice in a row, by the name it waits for or by a typo of it."""
        waiters = [j for j in self.model.jobs.values() if j.waits]
        if not waiters:
            return
        unfinished = [j for j in waiters if j.state not in FINAL and not j.pruned]
        chosen = unfinished if live and unfinished else waiters
        job = chosen[pick % len(chosen)]
        for n in range(2 if twice else 1):
            self.send(job, payload + n, name)

    def send(self, job: Job, payload: int, name: str = "go") -> None:
        before = f"{job.state}, mailbox {job.mailbox}"
        expected = self.model.signal(job, name, payload)
        try:
            receipt = self.run(self.app.signal(job.id, name, payload))
        except skiplock.JobNotFound:
            got: tuple[str, str | None] = ("notfound", None)
        else:  # a SignalReceipt (an outcome alone before issue 42)
            outcome = getattr(receipt, "outcome", receipt)
            got = (outcome.value, getattr(receipt, "waiting_for", expected[1]))
        if got != expected:
            raise Divergence(f"signal {name!r} to job {job.id} ({before}): {got}, not {expected}")

    @rule(seconds=st.sampled_from([5, 30, 61, 100, 3600]))
    def advance(self, seconds: int) -> None:
        self.clock.advance(seconds)
        self.model.now += seconds

    @rule(finished=st.sampled_from(AGES), dead=st.sampled_from(AGES))
    def prune(self, finished: float, dead: float) -> None:
        must, may = self.model.prune_sets(finished, dead)
        before = self._ids()
        self.run(self.app.prune(finished_age_s=finished, dead_age_s=dead, who="model"))
        gone = before - self._ids()
        if kept := must - gone:
            raise Divergence(f"prune(finished {finished}, dead {dead}) kept {sorted(kept)}")
        if wrong := gone - must - may:
            raise Divergence(f"prune(finished {finished}, dead {dead}) deleted {sorted(wrong)}")
        self.model.pruned(gone)

    def _ids(self) -> set[int]:
        return {r.id for r in self.run(self.app.list_jobs(None, JobFilter(limit=10_000)))}

    # -- batches -------------------------------------------------------------------------------

    def _open_batches(self) -> list[int]:
        return [b.id for b in self.model.batches.values() if not b.closed and not b.raised]

    @rule(pick=PICK)
    def close_batch(self, pick: int) -> None:
        batches = self._open_batches()
        if not batches:
            return
        batch_id = batches[pick % len(batches)]
        if self.run(self.app.close_batch(batch_id)) != self.model.close_batch(batch_id):
            raise Divergence(f"close_batch({batch_id}) disagrees with the model")

    @rule(pick=PICK, scripts=st.lists(SCRIPT, min_size=1, max_size=2), fails=st.booleans())
    def add_to_batch(self, pick: int, scripts: list[list[str]], fails: bool) -> None:
        """``async with app.batch(id=...)`` adds to an open batch and leaves it open; a block
        of it that raises (``fails``) aborts the whole batch."""
        batches = self._open_batches()
        if not batches:
            return
        batch_id = batches[pick % len(batches)]
        fails = fails and checks.CHECK_RAISING_BATCH_BLOCK
        self.run(self._add_to_batch(batch_id, scripts, fails))
        if fails:
            self.model.abort_batch(batch_id)

    async def _add_to_batch(self, batch_id: int, scripts: list[list[str]], fails: bool) -> None:
        block = (
            self.app.batch(id=batch_id)
            if checks.CHECK_BATCH_BY_ID_STAYS_OPEN
            else self.app.batch(id=batch_id, close=False)
        )
        with contextlib.suppress(_AddFailed):
            async with block:
                for script in scripts:
                    token = self.token()
                    handle = await self.task("work", script).aenqueue(token)
                    job = self.add(handle.id, "work", "work", token, script)
                    self.model.join_batch(batch_id, job)
                if fails:
                    raise _AddFailed
        if not fails and (await self.app.batch_info(batch_id)).closed:
            raise Divergence(f"async with app.batch(id={batch_id}) closed the batch")

    # -- the end of an example -----------------------------------------------------------------

    def settle(self) -> None:
        """The example's end: every waiter that still waits signalled once and a drain; then
        everything run out as time passes (each round: an hour on the clock, every batch
        closed, a drain, the sweep, a drain); then retention (the defaults, 30 days on)
        prunes what is done, and a last sweep and drain. Nothing may be left ready, and what
        still waits must have an event that could release it (a parent a person may
        requeue)."""
        for job in self.model.live():
            if job.waits and job.state not in FINAL and len(job.mailbox) < job.waits:
                self.send(job, 100 + len(job.mailbox))
        self.drain_now()
        for _ in range(SETTLE_ROUNDS):
            self._one_round()
            if not any(j.state == PENDING for j in self.model.live()):
                break
        self.advance(RETENTION_S)
        self.prune(7 * DAY_S, RETENTION_S - DAY_S)
        self.maintenance()
        self.drain_now()
        self.database_matches_model()
        if stranded := self.model.stranded():
            raise Divergence(f"waiting jobs no event can release: {stranded}")

    def _one_round(self) -> None:
        self.advance(3600)
        for batch_id in self._open_batches():
            self.run(self.app.close_batch(batch_id))
            self.model.close_batch(batch_id)
        self.drain_now()
        self.maintenance()
        self.drain_now()
        self.database_matches_model()
