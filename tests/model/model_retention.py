"""What the model says of keys and retention: who holds a unique key, what a prune must and
may delete (and what that releases), and which waiting jobs no event could ever release.

A base of ``model.Model``: these read its jobs and clock and never change a job but through
the edge resolution ``pruned`` asks of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model_jobs import DEAD, FINAL, PENDING, RUNNING, SUCCEEDED, WAITING, Job

if TYPE_CHECKING:
    from .model import Model


class KeysAndRetention:
    def holders(self: Model, scope: tuple[str, str]) -> list[Job]:
        """The jobs holding a unique key now: pending, running, parked on a signal (a parked
        job keeps its key, as a running one does: docs/concepts/lifecycle.md), or succeeded
        and keeping it."""
        found = []
        for job in self.live():
            if job.unique != scope:
                continue
            window = job.unique_for is not None and self.now < job.enqueued_at + job.unique_for
            keeps = job.unique_while == "live_or_succeeded" or window
            parked = job.state == WAITING and job.parked_on is not None
            if job.state in (PENDING, RUNNING) or parked or (job.state == SUCCEEDED and keeps):
                found.append(job)
        return found

    def prune_sets(self: Model, finished_age: float, dead_age: float) -> tuple[set[int], set[int]]:
        """(must go, may go) for ``app.prune`` with these ages now."""
        must: set[int] = set()
        may: set[int] = set()
        for job in self.live():
            if job.state not in FINAL:
                continue
            age = dead_age if job.state == DEAD else finished_age
            times = [t for t in (job.finished_at, job.discarded_at) if t is not None]
            old = [self.now - t > age for t in times]
            if all(old) and not self._kept_for_a_wait_child(job):
                must.add(job.id)
            elif any(old):
                may.add(job.id)
        return must, may

    def _kept_for_a_wait_child(self: Model, job: Job) -> bool:
        """A failed parent a ``wait`` child still waits on may be kept (so it can be retried)."""
        return self.pruned_parent_releases and any(
            job.id in self.jobs[c].open_parents and self.jobs[c].state == WAITING
            for c in job.children
        )

    def pruned(self: Model, ids: set[int]) -> None:
        for job_id in ids:
            self.jobs[job_id].pruned = True
        for job_id in ids:
            for child in self.jobs[job_id].children:
                self._resolve_edge(self.jobs[child], self.jobs[job_id])

    def stranded(self: Model) -> list[str]:
        """Waiting jobs no event can release: no live parent, no retryable failed parent of a
        ``wait`` edge, no open batch, no signal or timeout."""
        found = []
        for job in self.live():
            if job.state != WAITING or job.parked_on is not None:
                continue
            if job.callback is not None and not self.batches[job.callback[0]].closed:
                continue
            events = [self._edge_event(job, self.jobs[p]) for p in job.open_parents]
            if not any(events):
                found.append(f"job {job.id} ({job.kind} {job.token}) waits on {job.open_parents}")
        return found

    def _edge_event(self: Model, child: Job, parent: Job) -> bool:
        if parent.pruned:  # nothing can requeue it (a known defect while it is not checked)
            return not self.pruned_parent_releases
        return parent.state not in FINAL or child.policy == "wait"
