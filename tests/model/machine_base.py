"""What every rule of the state machine stands on: a database per test (a SQLite file, or a
PostgreSQL schema) emptied between examples, an app on a pinned clock with the machine's
tasks, the recorder, the model, and the check after every step that the database holds what
the model says (every job's state, attempt, result and last error type; no job the model does
not know; no job gone that no prune took)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from hypothesis.stateful import RuleBasedStateMachine, invariant

import skiplock
from skiplock import JobFilter, JobState, Signature

from ..helpers import FakeClock, pg_admin
from . import checks
from .harness import TIMEOUT_S, Recorder, register
from .model import Divergence, Job, Model
from .model_jobs import BIG, FINAL, PENDING, RUNNING, SUCCEEDED

T = TypeVar("T")
MAX_PAYLOAD_BYTES = 2048
"""Small, so that a chord of three ~900-byte results is over it and one of two is not."""


class World:
    """One event loop, one migrated database and one app on a pinned clock for every example
    of a test (a PostgreSQL schema costs ~0.3 s to migrate, more under load). Each example
    starts from an empty table: the one before cancelled what it left live and pruned it all
    a day later on the clock. A database that did not come out empty is replaced."""

    def __init__(self, db_url: str, tmp_path: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.db_url, self.tmp_path = db_url, tmp_path
        self.clock = FakeClock()
        self.databases = 0
        self.examples = 0
        self.url = ""
        self.app: skiplock.App | None = None

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)

    def begin(self) -> tuple[skiplock.App, Recorder, dict[str, skiplock.Task[..., Any]]]:
        """The app, its recorder and its tasks for a new example, on an empty table."""
        if self.app is None or self.run(self.app.count_jobs()):
            self._new_database()
        assert self.app is not None
        self.rec.reset()
        self.examples += 1
        return self.app, self.rec, self.tasks

    def end(self) -> None:
        """Cancel what the example left live (a cancel may release a callback: again until
        none is left), then prune everything a day later."""
        assert self.app is not None
        app = self.app
        for _ in range(5):
            live = [
                record
                for state in (JobState.PENDING, JobState.WAITING)
                for record in self.run(app.list_jobs(state, JobFilter(limit=10_000)))
            ]
            for record in live:
                self.run(app.cancel_job(record.id, who="model"))
            if not live:
                break
        self.clock.advance(86400)
        self.run(app.prune(finished_age_s=0.5, dead_age_s=0.5, who="model"))

    def _new_database(self) -> None:
        self._drop()
        self.databases += 1
        if self.db_url.startswith("sqlite"):
            self.url = f"sqlite:///{self.tmp_path / f'model-{self.databases}.db'}"
        else:
            schema = f"m_{uuid.uuid4().hex[:12]}"
            self.run(pg_admin(f'CREATE SCHEMA "{schema}"'))
            self.url = urlsplit(self.db_url)._replace(query=f"schema={schema}").geturl()
        app = skiplock.App(self.url, clock=self.clock, max_payload_bytes=MAX_PAYLOAD_BYTES)
        self.run(app.migrate())
        self.app, self.rec = app, Recorder(app)
        self.tasks = register(app, self.rec)

    def _drop(self) -> None:
        if self.app is None:
            return
        self.run(self.app.close())
        self.app = None
        if self.url.startswith("sqlite"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.url.removeprefix("sqlite:///"))
        else:
            schema = parse_qs(urlsplit(self.url).query)["schema"][0]
            self.run(pg_admin(f'DROP SCHEMA "{schema}" CASCADE'))

    def close(self) -> None:
        try:
            self._drop()
        finally:
            self.loop.close()


class MachineBase(RuleBasedStateMachine):
    world: World
    """Set on the subclass each test makes (``machine_for``)."""

    def __init__(self) -> None:
        super().__init__()
        self.app, self.rec, self.tasks = self.world.begin()
        self.clock = self.world.clock
        self.model = Model(
            max_payload_bytes=MAX_PAYLOAD_BYTES,
            drain_expires_waits=checks.CHECK_WAIT_TIMEOUT_UNDER_DRAIN,
            pruned_parent_releases=checks.CHECK_PRUNED_WAIT_PARENT,
        )
        self.tokens = 0
        self.weighed = False

    def run(self, coro: Awaitable[T]) -> T:
        return self.world.run(coro)

    def teardown(self) -> None:
        """Settle the example, unless a step already failed (Hypothesis tears down in a
        ``finally``: a second failure here would hide the first), then clean up."""
        try:
            if sys.exc_info()[0] is None:
                self.settle()
        finally:
            self.world.end()

    def settle(self) -> None:
        """Overridden by the machine: run everything out and check nothing is stranded."""

    # -- enqueueing, for the rules ----------------------------------------------------------

    def token(self, big: bool = False) -> str:
        self.tokens += 1
        return f"t{self.tokens}" + (BIG if big else "")

    def task(self, name: str, script: list[str], **options: Any) -> skiplock.Task[..., Any]:
        if "timeout" in script:
            options["timeout"] = TIMEOUT_S
        return self.tasks[name].using(**options) if options else self.tasks[name]

    def sig(self, name: str, token: str, script: list[str]) -> Signature:
        self.rec.scripts[token] = script
        return self.task(name, script).s(token)

    def add(
        self,
        job_id: int,
        kind: str,
        task: str,
        token: str,
        script: list[str],
        attempts: int = 5,
        state: str = PENDING,
        **fields: Any,
    ) -> Job:
        self.rec.scripts[token] = script
        job = Job(job_id, kind, task, token, script, attempts, state, **fields)
        return self.model.add(job)

    # -- the database against the model ----------------------------------------------------

    @invariant()
    def database_matches_model(self) -> None:
        records = self.run(self.app.list_jobs(None, JobFilter(limit=10_000)))
        found = {r.id: r for r in records}
        known = {j.id: j for j in self.model.live()}
        if extra := sorted(set(found) - set(known)):
            raise Divergence(f"jobs the model never enqueued: {[_row(found[i]) for i in extra]}")
        if missing := sorted(set(known) - set(found)):
            raise Divergence(f"jobs gone that no prune deleted: {missing}")
        for job_id, job in known.items():
            self._compare(job, found[job_id])

    def _compare(self, job: Job, record: skiplock.JobRecord) -> None:
        state = record.state.value
        where = f"job {job.id} ({job.kind} {job.token})"
        if not job.may_be(state) and self.model.waits_on_a_crash(job):
            self.model.sweep_crashed()  # released at once, not left to the sweep: allowed
        if not job.may_be(state) or state == RUNNING:
            raise Divergence(f"{where} is {state}; the model says {job.state}: {_row(record)}")
        self.model.collapse(job, state)
        if not job.loose_attempt and record.attempt != job.attempt:
            raise Divergence(f"{where} is at attempt {record.attempt}, the model's {job.attempt}")
        if state == SUCCEEDED and record.result != job.result:
            raise Divergence(f"{where} stored {record.result!r:.100}, not {job.result!r:.100}")
        if job.error_type and state in FINAL - {SUCCEEDED}:
            got = record.errors[-1].get("type") if record.errors else None
            if got != job.error_type:
                raise Divergence(f"{where} is {state} with {got}, not {job.error_type}")

    @invariant()
    def steps_ran_once(self) -> None:
        """A durable step's function ran once per call, across retries and kills (a person's
        requeue may run it again)."""
        for job in self.model.live():
            if job.kind != "stepper":
                continue
            for i in range(job.steps):
                calls = self.rec.step_calls[(job.token, i)]
                if calls - self.rec.zombie_calls[(job.token, i)] > 1 + job.person_retries:
                    raise Divergence(f"job {job.id}: step {i} ran {calls} times")
                if job.state == SUCCEEDED and calls == 0:
                    raise Divergence(f"job {job.id} succeeded; its step {i} never ran")


def _row(record: skiplock.JobRecord) -> str:
    last = record.errors[-1]["message"][:120] if record.errors else ""
    return f"[{record.id} {record.task} {record.state.value} args={record.args!r:.80} {last}]"
