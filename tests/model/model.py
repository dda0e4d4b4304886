"""A small model of what skiplock's docs promise a job does, in pure Python: no database, no
clock but its own seconds.

The model is the docs, not the code: docs/concepts/lifecycle.md (the six states and what each
outcome of an attempt does), delivery.md (unique keys, whose they are, ``on_conflict``,
windows, debounce), leases.md (a dead worker's job goes back to pending with its attempt
spent), docs/guides/keys.md (a key's cap and its turns; an ordered key runs its jobs one at a
time in enqueue order), retries.md (backoff, dead letters) and workflows.md (dependencies and
``on_parent_failure``, chains, groups, chords, batches and their abort, durable steps by name
and call order, a mailbox of signals per name, wait timeouts), as issue 42 left them.

A run of a real worker is replayed here as the events its task bodies recorded (``start``,
``end``, ``killed``, the clock moving): each is checked against what the model allows at that
moment (a job may start only while pending, due, under its key's cap and first of its ordered
key; its outcome must be the one its script and its mailbox say), so any interleaving the
worker chose is judged, not just the final states. ``Divergence`` names the difference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .model_jobs import (
    BACKOFF_S,
    CANCELLED,
    DEAD,
    FINAL,
    PENDING,
    RETRY_S,
    RUNNING,
    SNOOZE_S,
    SUCCEEDED,
    WAIT_S,
    WAITING,
    Batch,
    Divergence,
    Job,
    result_of,
)
from .model_retention import KeysAndRetention

__all__ = ["Divergence", "Job", "Model"]


@dataclass
class Model(KeysAndRetention):
    """Every job and batch of one example, and the model's clock (seconds since its start)."""

    max_payload_bytes: int
    drain_expires_waits: bool
    """Whether a drain alone times out parked waits past their timeout (issue 42, item 10)."""
    pruned_parent_releases: bool
    """Whether a ``wait`` child of a pruned dead parent is cancelled by the next sweep."""
    now: float = 0.0
    jobs: dict[int, Job] = field(default_factory=dict)
    batches: dict[int, Batch] = field(default_factory=dict)
    unswept: set[int] = field(default_factory=set)
    """Jobs a dead worker's release finished whose children the next sweep resolves ("each
    worker's rescuer sweeps up a release a crash left undone", docs/guides/workflows.md)."""

    # -- adding jobs ---------------------------------------------------------------------------

    def add(self, job: Job) -> Job:
        if job.id in self.jobs:
            raise Divergence(f"job id {job.id} handed out twice (enqueue of {job.token})")
        job.run_at = max(job.run_at, self.now)
        job.enqueued_at = self.now
        self.jobs[job.id] = job
        for parent in job.parents:
            self.jobs[parent].children.append(job.id)
        if job.state == WAITING:
            job.open_parents = set(job.parents)
            for parent in job.parents:  # parents finished before the child was written
                self._resolve_edge(job, self.jobs[parent])
        return job

    def live(self) -> list[Job]:
        return [j for j in self.jobs.values() if not j.pruned]

    # -- who may run ---------------------------------------------------------------------------

    def blocker(self, job: Job) -> str | None:
        """Why ``job`` may not be claimed now (None: it may)."""
        if job.state != PENDING:
            return f"it is {job.state}"
        if job.run_at > self.now:
            return f"it is not due for {job.run_at - self.now:g} s"
        if job.ckey is not None and job.key_limit is not None:
            running = sum(1 for j in self.live() if j.ckey == job.ckey and j.state == RUNNING)
            if running >= job.key_limit:
                return f"key {job.ckey} already runs {running} (its limit {job.key_limit})"
        if job.okey is not None:
            for earlier in self.live():
                same = earlier.okey == job.okey and earlier.id < job.id
                if same and not earlier.left_for_good():
                    return f"job {earlier.id} of ordered key {job.okey} is {earlier.state}"
        return None

    def ready(self, queues: set[str] | None = None) -> list[Job]:
        """Jobs a worker of ``queues`` (None: any) must not leave behind."""
        return [
            j
            for j in self.live()
            if (queues is None or j.queue in queues) and self.blocker(j) is None
        ]

    # -- the events of a worker's run --------------------------------------------------------

    def start(self, job_id: int, token: str, attempt: int, seen: Any) -> None:
        job = self._known(job_id)
        why = self.blocker(job)
        if why is not None:
            raise Divergence(f"job {job_id} ({job.kind} {job.token}) started while {why}")
        if token != job.token:
            raise Divergence(f"job {job_id} ran with {token!r}'s arguments, not {job.token!r}'s")
        job.state, job.attempt = RUNNING, job.attempt + 1
        job.token_runs, job.started = job.token_runs + 1, True
        if attempt != job.attempt:
            raise Divergence(f"job {job_id} ran as attempt {attempt}, the model's {job.attempt}")
        if job.passes is not None and seen != job.passed:
            raise Divergence(
                f"job {job_id} ({job.kind}) was given {_short(seen)}, not {_short(job.passed)}"
            )
        job.expect = self._expected_run(job)

    def end(self, job_id: int, outcome: str, value: Any) -> None:
        job = self._known(job_id)
        if job.state != RUNNING:
            raise Divergence(f"job {job_id} ended while the model has it {job.state}")
        if (outcome, value) != job.expect:
            raise Divergence(
                f"job {job_id} ({job.kind} {job.token}, run {job.token_runs}) ended "
                f"{outcome} {_short(value)}; the model expected {job.expect[0]} "
                f"{_short(job.expect[1])}"
            )
        getattr(self, f"_on_{outcome}")(job, value)

    def killed(self, job_id: int) -> None:
        """Its worker died; its supervisor released the lease (the attempt stays spent)."""
        job = self._known(job_id)
        if job.state != RUNNING:
            raise Divergence(f"job {job_id} released from a dead worker while {job.state}")
        if job.attempt >= job.max_attempts:
            self._final(job, DEAD, crashed=True)
        else:
            job.state = PENDING  # its run_at kept: it is due again at once

    def _expected_run(self, job: Job) -> tuple[str, Any]:
        got: list[Any] = []
        for k in range(job.waits):  # the k-th wait takes the mailbox's k-th entry
            if k >= len(job.mailbox):
                return "park", k
            kind, payload = job.mailbox[k]
            if kind == "timeout":
                got.append("timeout")
                break
            got.append(payload)
        step = job.script[job.token_runs - 1] if job.token_runs <= len(job.script) else "ok"
        if step != "ok":
            return step, None
        if job.kind == "stepper":
            return "ok", [f"{job.token}:{i}" for i in range(job.steps)]
        if job.waits:
            return "ok", [job.token, *got]
        return "ok", result_of(job.token)

    def _on_ok(self, job: Job, value: Any) -> None:
        job.result = value
        self._final(job, SUCCEEDED)

    def _on_fail(self, job: Job, _value: Any, delay: float = BACKOFF_S) -> None:
        if job.attempt >= job.max_attempts:
            self._final(job, DEAD)
        else:
            job.state, job.run_at = PENDING, self.now + delay

    _on_timeout = _on_fail

    def _on_retry(self, job: Job, value: Any) -> None:
        self._on_fail(job, value, RETRY_S)

    def _on_permanent(self, job: Job, _value: Any) -> None:
        self._final(job, DEAD)

    def _on_cancel(self, job: Job, _value: Any) -> None:
        self._final(job, CANCELLED)

    def _on_snooze(self, job: Job, _value: Any) -> None:
        job.state, job.run_at, job.attempt = PENDING, self.now + SNOOZE_S, job.attempt - 1

    def _on_park(self, job: Job, wait: int) -> None:
        job.state, job.attempt = WAITING, job.attempt - 1
        job.parked_on, job.parked_until = wait, self.now + WAIT_S

    # -- workflows -----------------------------------------------------------------------------

    def _final(self, job: Job, state: str, crashed: bool = False) -> None:
        job.state, job.finished_at, job.discarded_at = state, self.now, None
        job.parked_on = None
        if crashed:
            self.unswept.add(job.id)
            return
        for child in job.children:
            self._resolve_edge(self.jobs[child], job)

    def sweep_crashed(self) -> None:
        """Resolve the children of jobs a crash finished (what the sweep does)."""
        crashed, self.unswept = self.unswept, set()
        for job_id in sorted(crashed):
            for child in self.jobs[job_id].children:
                self._resolve_edge(self.jobs[child], self.jobs[job_id])

    def waits_on_a_crash(self, job: Job) -> bool:
        return bool(job.open_parents & self.unswept)

    def _resolve_edge(self, child: Job, parent: Job) -> None:
        """What a parent that finished (or was pruned) means for a waiting child."""
        if child.state != WAITING or parent.id not in child.open_parents:
            return
        if not parent.pruned and parent.state not in FINAL:
            return
        failed = parent.pruned or parent.state != SUCCEEDED
        if failed and child.policy == "wait":
            if parent.pruned and self.pruned_parent_releases:
                child.allowed = frozenset({WAITING, CANCELLED})  # the next sweep cancels it
            return
        child.open_parents.discard(parent.id)
        if not failed:  # "each result is copied onto the edge when its parent finishes"
            child.edge_results[parent.id] = parent.result
        if failed and child.policy == "cancel":
            child.error_type = "ParentFailed"
            self._final(child, CANCELLED)
        else:
            self._maybe_release(child)

    def _maybe_release(self, child: Job) -> None:
        if child.open_parents or child.state != WAITING or child.parked_on is not None:
            return
        if child.callback is not None and not self.batches[child.callback[0]].closed:
            return
        child.passed = self._passed(child)
        child.state, child.run_at = PENDING, self.now
        if child.passes == "all" and len(json.dumps(child.passed)) > self.max_payload_bytes:
            child.error_type, child.loose_attempt = "PayloadTooLarge", True
            self._final(child, DEAD)  # the chord body alone fails

    def _passed(self, child: Job) -> Any:
        """What a released child is given: its parents' results as their edges resolved."""
        results = child.edge_results
        if child.passes == "previous":
            return results.get(child.parents[0])
        if child.passes == "all":
            return [results.get(p) for p in child.parents]
        if child.passes == "batch":
            return child.callback[0] if child.callback else None
        if child.passes == "parents":
            return {p: results[p] for p in child.parents if p in results}
        return None

    def close_batch(self, batch_id: int) -> bool:
        batch = self.batches[batch_id]
        if batch.closed:
            return False
        batch.closed = True
        for callback in batch.callbacks():
            self._maybe_release(self.jobs[callback])
        return True

    def abort_batch(self, batch_id: int) -> None:
        """A block of the batch raised: it is aborted, as a failed transaction leaves nothing
        behind. Neither callback runs (each still waiting is cancelled, ``BatchAborted``);
        the members that never started are cancelled; those that did run to their end."""
        batch = self.batches[batch_id]
        batch.raised = True
        for callback_id in batch.callbacks():
            callback = self.jobs[callback_id]
            if callback.state == WAITING:
                callback.error_type = "BatchAborted"
                self._final(callback, CANCELLED)
        for member_id in batch.members:
            member = self.jobs[member_id]
            if member.state == PENDING and not member.started:
                self._final(member, CANCELLED)

    def join_batch(self, batch_id: int, member: Job) -> None:
        batch = self.batches[batch_id]
        batch.members.append(member.id)
        member.batch_of = batch_id
        for callback_id in batch.callbacks():
            callback = self.jobs[callback_id]
            if callback.state == WAITING:
                callback.open_parents.add(member.id)
                member.children.append(callback_id)

    # -- what people do ----------------------------------------------------------------------

    def cancel(self, job: Job) -> str:
        """The state ``app.cancel_job`` must return (and leave the job in)."""
        if job.state in (PENDING, WAITING):
            self._final(job, CANCELLED)
        return job.state

    def retry(self, job: Job) -> Job | None:
        """Requeue a finished job (None: it was not finished). The caller checks the key."""
        if job.state not in FINAL:
            return None
        job.state, job.attempt, job.run_at = PENDING, 0, self.now
        job.result, job.finished_at, job.discarded_at = None, None, None
        job.person_retries += 1
        job.allowed, job.error_type = None, None
        return job

    def requeue_child(self, job: Job) -> str:
        """A person requeues a job cancelled while it waited for its parents (a chain's link,
        a chord's body): it never got their results, so it is not run without them. Refused
        (``"refused"``: ``ParentResultGone``, nothing changes) when a parent ended without a
        result; else back to waiting for the parents still to succeed, or pending with every
        result at once. The state it must be in after."""
        parents = [self.jobs[p] for p in job.parents]
        if any(p.pruned or p.state in (DEAD, CANCELLED) for p in parents):
            return "refused"
        job.person_retries, job.attempt, job.finished_at = job.person_retries + 1, 0, None
        job.error_type = None
        job.open_parents = {p.id for p in parents if p.state != SUCCEEDED}
        job.edge_results.update({p.id: p.result for p in parents if p.state == SUCCEEDED})
        job.state = WAITING
        self._maybe_release(job)
        return job.state

    def discard(self, job: Job) -> None:
        job.discarded_at, job.state = self.now, CANCELLED

    def signal(self, job: Job, name: str, payload: Any) -> tuple[str, str | None]:
        """What ``app.signal`` must say (outcome, the name the job is parked on), and what it
        does: a job's signals are a mailbox per name, each kept in order for the next
        ``wait_for`` of its name; the one a parked job waits for makes it pending."""
        if job.pruned:
            return "notfound", None
        if job.state in FINAL:
            return "finished", None
        parked = "go" if job.state == WAITING and job.parked_on is not None else None
        if name != "go":  # no wait of this name here: kept, never taken
            return "kept", parked
        job.mailbox.append(("signal", payload))
        if parked is None:
            return "kept", None
        job.state, job.run_at, job.parked_on = PENDING, self.now, None
        return "delivered", "go"

    def waits_due_within(self, seconds: float) -> bool:
        return any(
            j.parked_until is not None and j.parked_until <= self.now + seconds
            for j in self.live()
            if j.state == WAITING and j.parked_on is not None
        )

    def expire_waits(self) -> None:
        """Parked waits past their timeout: the timeout takes its place in the mailbox (the
        wait raises ``SignalTimeout``) and the job runs again."""
        for job in self.live():
            parked = job.state == WAITING and job.parked_on is not None
            if parked and job.parked_until is not None and job.parked_until <= self.now:
                job.mailbox.append(("timeout", None))
                job.state, job.run_at, job.parked_on = PENDING, self.now, None

    def sweep(self) -> None:
        """What every worker's rescuer does each maintenance interval (no lease is held
        between the machine's steps, so only the workflow sweep can change anything)."""
        self.expire_waits()
        self.sweep_crashed()
        for job in self.live():
            if job.state == WAITING and job.allowed is not None:
                self.collapse(job, CANCELLED)  # a wait child of a pruned parent

    # -- reconciling with the database ------------------------------------------------------

    def collapse(self, job: Job, state: str) -> None:
        """The database chose one of the states the model allowed for ``job``."""
        if job.allowed is None or state == job.state:
            return
        job.allowed = None
        if state == CANCELLED:  # a wait child of a pruned parent: "no retry can come"
            job.error_type = "ParentFailed"
            self._final(job, CANCELLED)

    def _known(self, job_id: int) -> Job:
        if job_id not in self.jobs:
            raise Divergence(f"a task ran for job {job_id}, which the model never enqueued")
        return self.jobs[job_id]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "..."
