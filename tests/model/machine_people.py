"""The state machine's rules for what people and time do: cancel, requeue and discard a job,
signal a waiting one, close or grow a batch, prune, and let the pinned clock move; and, at
each example's end, the settling that runs everything out and finds what stayed stranded."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

import skiplock
from skiplock import JobFilter

from . import checks
from .machine_enqueue import PICK, SCRIPT
from .machine_run import Runs
from .model import Divergence, Job
from .model_jobs import CANCELLED, DEAD, FINAL, PENDING, RUNNING, SUCCEEDED, WAITING

RETRYABLE = {"work", "keyed", "ordered", "weighted"}
"""Kinds a person requeues here. Waiters and steppers are left out (whether a requeue keeps
their stored signals and steps, the docs do not say), and so are batch callbacks and
dependency children (documented to run at once, without their parents)."""
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
        again, or pending with its parents' results; never run without them."""
        try:
            self.run(self.app.retry_job(job.id))
        except (skiplock.SkiplockError, ValueError):  # refused: it stays cancelled
            return
        state = self.run(self.app.get_job(job.id)).state.value
        parents_done = all(self.model.jobs[p].state == SUCCEEDED for p in job.parents)
        if state == PENDING and not parents_done:
            raise Divergence(
                f"retry_job({job.id}) made {job.kind} {job.token} pending though its parents "
                f"{[(p, self.model.jobs[p].state) for p in job.parents]} did not all succeed: "
                "it runs without their results"
            )
        if state not in (PENDING, WAITING):
            raise Divergence(f"retry_job({job.id}) ({job.kind}) left it {state}")
        self.model.requeue_child(job, state)

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

    @rule(pick=PICK, payload=st.integers(0, 99), live=st.booleans(), twice=st.booleans())
    def signal(self, pick: int, payload: int, live: bool, twice: bool) -> None:
        """Signal a waiter (one still to finish, when ``live`` and there is one), once or
        twice in a row."""
        waiters = [j for j in self.model.jobs.values() if j.waits]
        if not waiters:
            return
        unfinished = [j for j in waiters if j.state not in FINAL and not j.pruned]
        chosen = unfinished if live and unfinished else waiters
        job = chosen[pick % len(chosen)]
        for n in range(2 if twice else 1):
            self.send(job, payload + n)

    def send(self, job: Job, payload: int) -> None:
        allowed = self.model.signal(job)
        try:
            got = self.run(self.app.signal(job.id, "go", payload)).value
        except skiplock.JobNotFound:
            got = "notfound"
        if got not in allowed:
            raise Divergence(
                f"signal to job {job.id} ({job.state}, signals {job.signals}, "
                f"timed out at {job.timed_out_at}): {got}, not {allowed}"
            )
        if got == "delivered":
            self.model.delivered(job, payload)

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

    @rule(pick=PICK, scripts=st.lists(SCRIPT, min_size=1, max_size=2))
    def add_to_batch(self, pick: int, scripts: list[list[str]]) -> None:
        batches = self._open_batches()
        if not batches:
            return
        batch_id = batches[pick % len(batches)]
        self.run(self._add_to_batch(batch_id, scripts))

    async def _add_to_batch(self, batch_id: int, scripts: list[list[str]]) -> None:
        block = (
            self.app.batch(id=batch_id)
            if checks.CHECK_BATCH_BY_ID_STAYS_OPEN
            else self.app.batch(id=batch_id, close=False)
        )
        async with block:
            for script in scripts:
                token = self.token()
                handle = await self.task("work", script).aenqueue(token)
                self.model.join_batch(batch_id, self.add(handle.id, "work", "work", token, script))
        if (await self.app.batch_info(batch_id)).closed:
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
            if job.waits and job.state not in FINAL and len(job.signals) < job.waits:
                self.send(job, 100 + len(job.signals))
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
