"""The state machine's enqueue rules: plain, keyed and ordered jobs, unique keys with each
``on_conflict``, debounce, dependencies, chains, groups, chords, batches, waiters on a signal
and durable steps; each through the public API, each mirrored in the model."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

import skiplock
from skiplock import chain, chord, group

from . import checks
from .harness import TIMEOUT_S
from .machine_base import MachineBase
from .model import Divergence, Job
from .model_jobs import (
    BIG,
    DEBOUNCE_S,
    PENDING,
    UNIQUE_FOR_S,
    WAITING,
    Batch,
)

STEPS = ["ok", "ok", "fail", "permanent", "timeout", "cancel", "retry", "snooze"]
SCRIPT = st.lists(st.sampled_from(STEPS), max_size=2)
KEYED_SCRIPT = st.lists(st.sampled_from([s for s in STEPS if s != "timeout"]), max_size=2)
"""Without timeouts: a key of limit 1 runs its jobs' timeouts one after another (real
seconds, no new path), and a unique or debounced enqueue may hand its arguments to a job
enqueued without a ``timeout``."""
SIMPLE = st.lists(st.sampled_from(["ok", "fail", "permanent"]), max_size=1)
AFTER_WAIT = st.lists(st.sampled_from(["ok", "fail"]), max_size=1)
ATTEMPTS = st.integers(1, 3)
PICK = st.integers(0, 1000)
KEY_LIMITS = {"k1": 1, "k2": 2, "kx": None}
ORDERED = {"o1": "block", "o2": "skip"}
UNIQUE_HOLDS: dict[str, dict[str, Any]] = {
    "u1": {},
    "u2": {"unique_while": "live_or_succeeded"},
    "u3": {"unique_for": UNIQUE_FOR_S},
}
"""Each unique key string always comes with one way of holding it (the docs do not say what
mixing them on one key means)."""


class Enqueues(MachineBase):
    @rule(script=SCRIPT, attempts=ATTEMPTS, delay=st.sampled_from([0, 20.5]))
    def enqueue_plain(self, script: list[str], attempts: int, delay: float) -> None:
        token = self.token()
        options: dict[str, Any] = {"max_attempts": attempts}
        if delay:
            options["run_after"] = timedelta(seconds=delay)
        handle = self.run(self.task("work", script, **options).aenqueue(token))
        run_at = self.model.now + delay
        self.add(handle.id, "work", "work", token, script, attempts, run_at=run_at)

    @rule(key=st.sampled_from(sorted(KEY_LIMITS)), n=st.integers(1, 3), script=KEYED_SCRIPT)
    def enqueue_keyed(self, key: str, n: int, script: list[str]) -> None:
        limit = KEY_LIMITS[key]
        task = self.task("work", script, concurrency_key=key, key_limit=limit)
        tokens = [self.token() for _ in range(n)]
        handles = self.run(self.app.enqueue_many(task.prepare(t) for t in tokens))
        for handle, token in zip(handles, tokens, strict=True):
            self.rec.holds.add(token)
            self.add(handle.id, "keyed", "work", token, script, ckey=key, key_limit=limit)

    @rule(key=st.sampled_from(sorted(ORDERED)), n=st.integers(1, 3), script=KEYED_SCRIPT)
    def enqueue_ordered(self, key: str, n: int, script: list[str]) -> None:
        on_dead = ORDERED[key]
        task = self.task("work", script, ordering_key=key, ordering_on_dead=on_dead)
        for _ in range(n):
            token = self.token()
            handle = self.run(task.aenqueue(token))
            self.add(handle.id, "ordered", "work", token, script, okey=key, on_dead=on_dead)

    @rule(
        task=st.sampled_from(["work", "work_b"]),
        key=st.sampled_from(sorted(UNIQUE_HOLDS)),
        conflict=st.sampled_from(["keep", "replace", "reject"]),
        shared=st.booleans(),
        script=KEYED_SCRIPT,
    )
    def enqueue_unique(
        self, task: str, key: str, conflict: str, shared: bool, script: list[str]
    ) -> None:
        """A unique key is its task's own (``unique_scope="task"``), or one key space for
        every task that says ``"shared"``; the same string in the two is two keys."""
        per_task = checks.CHECK_UNIQUE_KEYS_PER_TASK
        name = key if per_task else f"{task}:{key}"
        options: dict[str, Any] = {"unique_key": name, "on_conflict": conflict}
        scope = (task, name)
        if shared and per_task:
            options["unique_scope"], scope = "shared", ("", name)
        hold = UNIQUE_HOLDS[key]
        holders = self.model.holders(scope)
        token = self.token()
        try:
            handle = self.run(self.task(task, script, **options, **hold).aenqueue(token))
        except skiplock.DuplicateJob as exc:
            if conflict != "reject" or exc.job_id not in {h.id for h in holders}:
                why = f"{task} key {scope} {conflict}: {exc}; holders {holders}"
                raise Divergence(why) from None
            return
        if not holders:
            if (other := self.model.jobs.get(handle.id)) is not None:
                raise Divergence(
                    f"{task}'s enqueue of key {scope}, which no job holds, "
                    f"returned job {other.id} of task {other.task}"
                )
            self.add(handle.id, "work", task, token, script, unique=scope, **hold)
            return
        self._conflict(handle.id, holders, conflict, token, script, task)

    def _conflict(
        self,
        got: int,
        holders: list[Job],
        conflict: str,
        token: str,
        script: list[str],
        task: str,
    ) -> None:
        """An enqueue met its key's holder: it got the holder's handle, and ``replace``
        rewrote a pending holder of its own task (never another task's)."""
        if conflict == "reject" or got not in {h.id for h in holders}:
            ids = [h.id for h in holders]
            raise Divergence(f"{conflict}: got job {got}, the key's holders are {ids}")
        holder = self.model.jobs[got]
        if conflict == "replace" and holder.state == PENDING and holder.task == task:
            self.rewrite(holder, token, script, self.model.now)

    def rewrite(self, job: Job, token: str, script: list[str], run_at: float) -> None:
        """A pending holder takes a new enqueue's arguments and run time."""
        self.rec.scripts[token] = script
        job.token, job.script, job.token_runs, job.run_at = token, script, 0, run_at

    @rule(task=st.sampled_from(["work", "work_b"]), key=st.sampled_from(["d1", "d2"]))
    def enqueue_debounced(self, task: str, key: str) -> None:
        name = key if checks.CHECK_UNIQUE_KEYS_PER_TASK else f"{task}:{key}"
        token, script = self.token(), []
        pending = [h for h in self.model.holders((task, name)) if h.state == PENDING]
        debounced = self.task(task, script, unique_key=name, debounce=DEBOUNCE_S)
        handle = self.run(debounced.aenqueue(token))
        run_at = self.model.now + DEBOUNCE_S
        if not pending:
            self.add(handle.id, "work", task, token, script, unique=(task, name), run_at=run_at)
        elif handle.id != pending[0].id:
            raise Divergence(f"debounce of {name!r}: job {handle.id}, not the pending {pending}")
        else:
            self.rewrite(pending[0], token, script, run_at)

    @rule(
        picks=st.lists(PICK, min_size=1, max_size=3),
        policy=st.sampled_from(["cancel", "run", "wait"]),
        script=SIMPLE,
    )
    def enqueue_dependent(self, picks: list[int], policy: str, script: list[str]) -> None:
        jobs = self.model.live()
        if not jobs:
            return
        parents = list(dict.fromkeys(jobs[i % len(jobs)].id for i in picks))
        token = self.token()
        task = self.task("child", script, depends_on=parents, on_parent_failure=policy)
        handle = self.run(task.aenqueue(token))
        self.add(
            handle.id,
            "child",
            "child",
            token,
            script,
            state=WAITING,
            parents=parents,
            policy=policy,
            passes="parents",
        )

    @rule(pick=PICK)
    def enqueue_on_a_pruned_parent(self, pick: int) -> None:
        gone = [j.id for j in self.model.jobs.values() if j.pruned]
        if not gone:
            return
        parent = gone[pick % len(gone)]
        try:
            self.run(self.tasks["child"].using(depends_on=[parent]).aenqueue(self.token()))
        except skiplock.UnknownParent:
            return
        raise Divergence(f"a child of pruned job {parent} was enqueued (UnknownParent expected)")

    @rule(scripts=st.lists(SIMPLE, min_size=2, max_size=3))
    def enqueue_chain(self, scripts: list[list[str]]) -> None:
        tokens = [self.token() for _ in scripts]
        steps = [
            self.sig("work" if i == 0 else "link", t, s)
            for i, (t, s) in enumerate(zip(tokens, scripts, strict=True))
        ]
        handle = self.run(chain(*steps).aenqueue())
        previous: int | None = None
        for job_id, token, script in zip(handle.ids, tokens, scripts, strict=True):
            if previous is None:
                self.add(job_id, "work", "work", token, script)
            else:
                self.add(
                    job_id,
                    "link",
                    "link",
                    token,
                    script,
                    state=WAITING,
                    parents=[previous],
                    passes="previous",
                )
            previous = job_id

    @rule(scripts=st.lists(SCRIPT, min_size=1, max_size=3))
    def enqueue_group(self, scripts: list[list[str]]) -> None:
        tokens = [self.token() for _ in scripts]
        sigs = [self.sig("work", t, s) for t, s in zip(tokens, scripts, strict=True)]
        handle = self.run(group(*sigs).aenqueue())
        for job_id, token, script in zip(handle.ids, tokens, scripts, strict=True):
            self.add(job_id, "work", "work", token, script)

    @rule(n=st.integers(1, 4), big=st.booleans(), scripts=st.lists(SIMPLE, min_size=5, max_size=5))
    def enqueue_chord(self, n: int, big: bool, scripts: list[list[str]]) -> None:
        """A chord of ``n`` members; ``big`` ones return ~900 bytes each, so three or more
        are over the body's payload limit."""
        if not checks.CHECK_CHORD_OVER_PAYLOAD:
            big = big and n <= 2
        tokens = [self.token(big) for _ in range(n)]
        members = [self.sig("work", t, s) for t, s in zip(tokens, scripts, strict=False)]
        body = self.token()
        handle = self.run(chord(members, self.sig("body", body, scripts[-1])).aenqueue())
        *ids, body_id = handle.ids
        for job_id, token, script in zip(ids, tokens, scripts, strict=False):
            self.add(job_id, "work", "work", token, script)
        self.add(
            body_id, "body", "body", body, scripts[-1], state=WAITING, parents=ids, passes="all"
        )

    @rule(
        scripts=st.lists(SCRIPT, max_size=3),
        on_success=st.booleans(),
        on_complete=st.booleans(),
        end=st.sampled_from(["close", "open", "raise"]),
    )
    def enqueue_batch(
        self, scripts: list[list[str]], on_success: bool, on_complete: bool, end: str
    ) -> None:
        if end == "raise" and not checks.CHECK_RAISING_BATCH_BLOCK:
            end = "close"
        on_complete = on_complete or not on_success  # a batch needs a callback
        batch_id, members = self.run(self._batch(scripts, on_success, on_complete, end))
        self._members(batch_id, members, end)

    async def _batch(
        self, scripts: list[list[str]], on_success: bool, on_complete: bool, end: str
    ) -> tuple[int, list[tuple[int, str, list[str]]]]:
        success, complete = self.token(), self.token()
        block = self.app.batch(
            on_success=self.sig("callback", success, []) if on_success else None,
            on_complete=self.sig("callback", complete, []) if on_complete else None,
            close=end != "open",
        )
        members: list[tuple[int, str, list[str]]] = []
        try:
            async with block as batch:
                info = await batch.info()
                self._callbacks(batch.id, info.on_success, success, info.on_complete, complete)
                for script in scripts:
                    token = self.token()
                    handle = await self.task("work", script).aenqueue(token)
                    members.append((handle.id, token, script))
                if end == "raise":
                    raise _BlockFailed
        except _BlockFailed:
            pass
        return batch.id, members

    def _callbacks(
        self,
        batch_id: int,
        success_id: int | None,
        success: str,
        complete_id: int | None,
        complete: str,
    ) -> None:
        self.model.batches[batch_id] = Batch(
            batch_id, on_success=success_id, on_complete=complete_id
        )
        for job_id, token, which, policy in (
            (success_id, success, "success", "cancel"),
            (complete_id, complete, "complete", "run"),
        ):
            if job_id is not None:
                self.add(
                    job_id,
                    "callback",
                    "callback",
                    token,
                    [],
                    state=WAITING,
                    policy=policy,
                    passes="batch",
                    callback=(batch_id, which),
                )

    def _members(self, batch_id: int, members: list[tuple[int, str, list[str]]], end: str) -> None:
        for job_id, token, script in members:
            self.model.join_batch(batch_id, self.add(job_id, "work", "work", token, script))
        if end == "raise":
            self.model.abort_batch(batch_id)
        elif end == "close":
            self.model.close_batch(batch_id)

    @rule(
        waits=st.sampled_from([1, 2]),
        script=AFTER_WAIT,
        keyed=st.sampled_from(["", "unique", "ordered"]),
    )
    def enqueue_waiter(self, waits: int, script: list[str], keyed: str) -> None:
        if waits == 2 and not checks.CHECK_SIGNALS_ONE_PER_WAIT:
            waits = 1
        if keyed == "ordered" and not checks.CHECK_ORDERED_KEY_ACROSS_WAIT:
            keyed = ""
        if keyed == "unique" and not checks.CHECK_PARKED_UNIQUE_JOB_RESUMES:
            keyed = ""
        options: dict[str, Any] = {}
        if keyed == "unique":
            options = {"unique_key": "w1"}
            holders = self.model.holders(("waiter", "w1"))  # a parked waiter among them
        if keyed == "ordered":
            options = {"ordering_key": "o1", "ordering_on_dead": "block"}
        token = self.token()
        handle = self.run(self.task("waiter", script, **options).aenqueue(token, waits))
        if keyed == "unique" and holders:
            self._conflict(handle.id, holders, "keep", token, script, "waiter")
            return
        fields = {"unique": ("waiter", "w1")} if keyed == "unique" else {}
        if keyed == "ordered":
            fields = {"okey": "o1", "on_dead": "block"}
        self.add(handle.id, "waiter", "waiter", token, script, waits=waits, **fields)
        if keyed == "ordered":  # the key's next step, which must wait for this one
            self.enqueue_ordered("o1", 1, [])

    @rule(steps=st.integers(1, 3), script=AFTER_WAIT)
    def enqueue_stepper(self, steps: int, script: list[str]) -> None:
        by_order = checks.CHECK_STEP_NAMES_BY_CALL_ORDER
        token = self.token()
        handle = self.run(self.task("stepper", script).aenqueue(token, steps, by_order))
        self.add(handle.id, "stepper", "stepper", token, script, steps=steps)


class _BlockFailed(Exception):
    """What the code inside a batch block raises (a user's error half way through it)."""


def timeout_options(script: list[str]) -> dict[str, Any]:
    return {"timeout": TIMEOUT_S} if "timeout" in script else {}


__all__ = ["BIG", "Enqueues", "timeout_options"]
