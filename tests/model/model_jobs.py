"""The model's nouns: a job as the docs describe it, a batch, the states, and the pinned
durations every scripted outcome uses.

The durations sit half a second off the whole seconds the machine moves its clock by, so no
comparison of a due time, a window or a retention with the clock is ever an equality (on
which the docs say nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PENDING, RUNNING, WAITING = "pending", "running", "waiting"
SUCCEEDED, DEAD, CANCELLED = "succeeded", "dead", "cancelled"
FINAL = frozenset({SUCCEEDED, DEAD, CANCELLED})

BACKOFF_S = 59.5
"""Every task's ``RetryPolicy(base_s=59.5, cap_s=59.5, jitter=False)``: a failure's delay."""
RETRY_S = 29.5
"""``Retry(in_s=29.5)``."""
SNOOZE_S = 29.5
"""``Snooze(in_s=29.5)``."""
WAIT_S = 99.5
"""``wait_for(..., timeout=99.5)``."""
DEBOUNCE_S = 9.5
UNIQUE_FOR_S = 90.5
BIG = "!"
"""A token ending so makes its task return about 900 bytes (a chord over its payload limit)."""
BIG_PAD = 900


class Divergence(AssertionError):
    """What the database or a task body did differs from what the docs promise."""


def result_of(token: str) -> str:
    """What a plain task returns for the enqueue ``token``."""
    return token + "x" * BIG_PAD if token.endswith(BIG) else token


@dataclass
class Job:
    """One job as the model sees it."""

    id: int
    kind: str
    """work, keyed, ordered, waiter, stepper, link, body, callback, child, weighted."""
    task: str
    token: str
    script: list[str]
    """What its runs do, in order (then ``ok``): ok, fail, permanent, timeout, cancel, retry,
    snooze."""
    max_attempts: int
    state: str
    queue: str = "default"
    run_at: float = 0.0
    enqueued_at: float = 0.0
    attempt: int = 0
    started: bool = False
    """Whether any of its runs began (a batch's abort cancels only members that never did)."""
    token_runs: int = 0
    """Runs since its arguments were last written (a replace starts them again)."""
    finished_at: float | None = None
    discarded_at: float | None = None
    result: Any = None
    expect: tuple[str, Any] = ("", None)
    """What its current run must end with (set at its start)."""
    # keys
    unique: tuple[str, str] | None = None
    unique_while: str = "live"
    unique_for: float | None = None
    ckey: str | None = None
    key_limit: int | None = None
    okey: str | None = None
    on_dead: str = "block"
    # workflows
    parents: list[int] = field(default_factory=list)
    open_parents: set[int] = field(default_factory=set)
    policy: str = "cancel"
    passes: str | None = None
    """What it is given at its release: previous, all, batch, parents (None: nothing)."""
    passed: Any = None
    edge_results: dict[int, Any] = field(default_factory=dict)
    """Parents' results as each edge resolved (a parent that failed then has none)."""
    children: list[int] = field(default_factory=list)
    batch_of: int | None = None
    callback: tuple[int, str] | None = None
    """(batch id, "success" or "complete") for a batch's callback."""
    # durable steps and signals
    steps: int = 0
    step_names_by_order: bool = True
    waits: int = 0
    mailbox: list[tuple[str, Any]] = field(default_factory=list)
    """Its signals of "go" in order, ("signal", payload), with ("timeout", None)
    where a wait timed out: the k-th ``wait_for("go")`` of every run takes entry k."""
    parked_on: int | None = None
    parked_until: float | None = None
    # people and uncertainty
    person_retries: int = 0
    pruned: bool = False
    allowed: frozenset[str] | None = None
    """States the database may show instead of ``state`` (a choice the docs leave open)."""
    error_type: str | None = None
    """The error type its last error must name once it failed (ParentFailed...)."""
    loose_attempt: bool = False
    """Its attempt count is not the docs' to say (a chord body failed before it ran)."""

    def left_for_good(self) -> bool:
        """Whether a later job of its ordered key may start (docs/guides/keys.md)."""
        if self.pruned or self.state in (SUCCEEDED, CANCELLED):
            return True
        return self.state == DEAD and self.on_dead == "skip"

    def may_be(self, state: str) -> bool:
        return state == self.state or (self.allowed is not None and state in self.allowed)


@dataclass
class Batch:
    id: int
    members: list[int] = field(default_factory=list)
    closed: bool = False
    raised: bool = False
    on_success: int | None = None
    on_complete: int | None = None

    def callbacks(self) -> list[int]:
        return [c for c in (self.on_success, self.on_complete) if c is not None]
