"""skiplock's semantics checked against a model of its docs (issue 42), on both databases.

A Hypothesis state machine (``tests/model/machine*.py``) drives random sequences of enqueues
(plain, keyed, ordered, unique with each ``on_conflict``, debounced, dependencies, chains,
groups, chords, batches, waiters, durable steps), worker runs whose jobs succeed, fail, time
out, cancel, retry or snooze, workers killed with a job in hand, cancels, requeues, discards,
signals, prunes and the clock moving, against the pure-Python model in ``tests/model/model.py``
(the docs, not the code). It fails on any difference: a job run twice or out of its turn, a
callback over a partial batch, a key over its cap, a job the worker left ready, a state,
attempt or result the docs do not allow, a waiting job no event can release.

Reproducible by default: ``derandomize=True`` and no example database, so CI runs the same
examples every time and a failure there fails the same way here. To explore beyond them, set
``SKIPLOCK_MODEL_SEED`` (an int, or ``random``) and ``SKIPLOCK_MODEL_EXAMPLES``; the failing
sequence Hypothesis prints is the reproduction.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from . import checks
from .machine_base import World
from .machine_enqueue import Enqueues
from .machine_people import People
from .sequences import SEQUENCES, Step

EXAMPLES = int(os.environ.get("SKIPLOCK_MODEL_EXAMPLES", "16"))
STEPS = int(os.environ.get("SKIPLOCK_MODEL_STEPS", "30"))
"""16 examples of up to 30 steps: all of tests/model in 16 s on both databases together on an
idle 2-core machine, 35-45 s with the other sessions' tests running (PostgreSQL three
quarters of it)."""
SEED = os.environ.get("SKIPLOCK_MODEL_SEED", "")


class ModelMachine(Enqueues, People):
    """Every rule; ``machine_for`` binds it to one test's world."""


def machine_for(world: World) -> type[ModelMachine]:
    return type("Machine", (ModelMachine,), {"world": world})


def the_settings() -> settings:
    explore = bool(SEED)
    return settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=not explore,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=explore,
        report_multiple_bugs=False,
        # no explain phase: its tracing of a worker's run costs minutes, for less than the
        # shrunk steps say
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    )


@pytest.fixture
def world(db_url: str, tmp_path: Path) -> Iterator[World]:
    the_world = World(db_url, tmp_path)
    yield the_world
    the_world.close()


@pytest.mark.timeout(900)  # passing takes seconds; shrinking a failure may take minutes
def test_the_semantics_match_the_model(world: World) -> None:
    machine = machine_for(world)
    if SEED:  # exploring: a seed of its own, printed so its run can be repeated
        chosen = random.randrange(2**32) if SEED == "random" else int(SEED)
        print(f"SKIPLOCK_MODEL_SEED={chosen}")
        machine = seed(chosen)(machine)
    run_state_machine_as_test(machine, settings=the_settings())


def test_the_pinned_sequences_match_the_model(world: World) -> None:
    """Each sequence of ``sequences.SEQUENCES`` whose flag is checked, on one fresh machine
    each; every divergence is reported, not just the first."""
    machine = machine_for(world)
    failures = []
    for name, (flag, steps) in SEQUENCES.items():
        if getattr(checks, flag) and (failure := _run_sequence(machine, steps)) is not None:
            failures.append(f"{name} ({flag}): {failure}")
    assert not failures, "\n".join(failures)


def _run_sequence(machine: type[ModelMachine], steps: list[Step]) -> str | None:
    state = machine()
    try:
        for rule, arguments in steps:
            getattr(state, rule)(**arguments)
            state.database_matches_model()
            state.steps_ran_once()
        state.teardown()
    except Exception as exc:  # a divergence, or what the API raised instead
        state.world.end()
        return f"{type(exc).__name__}: {exc}"
    return None
