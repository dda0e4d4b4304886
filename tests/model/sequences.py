"""Rule sequences the state machine found (shrunk by Hypothesis, then written the way a user
would order them), pinned so that each defect they reach is checked on every run whatever
the random examples happen to cover. Each names the flag in ``checks`` that gates it."""

from __future__ import annotations

from typing import Any

Step = tuple[str, dict[str, Any]]

SEQUENCES: dict[str, tuple[str, list[Step]]] = {
    "a raising batch block calls back over its partial batch": (
        "CHECK_RAISING_BATCH_BLOCK",
        [
            (
                "enqueue_batch",
                {"scripts": [[], []], "on_success": True, "on_complete": False, "end": "raise"},
            ),
            ("drain", {}),
        ],
    ),
    "a step name reused in a loop returns the first result": (
        "CHECK_STEP_NAMES_BY_CALL_ORDER",
        [("enqueue_stepper", {"steps": 2, "script": []}), ("drain", {})],
    ),
    "a second wait_for returns the first payload": (
        "CHECK_SIGNALS_ONE_PER_WAIT",
        [
            ("enqueue_waiter", {"waits": 2, "script": [], "keyed": ""}),
            ("drain", {}),
            ("signal", {"pick": 0, "payload": 1, "live": True, "twice": False, "name": "go"}),
            ("drain", {}),
        ],
    ),
    "a weight-3 key takes one job a turn at concurrency 1": (
        "CHECK_KEY_WEIGHTS_IN_STEADY_STATE",
        [("weighted_turns", {"again": False})],
    ),
    "a weighted key saves up turns while idle": (
        "CHECK_KEY_TURNS_AFTER_IDLE",
        [("weighted_turns", {"again": True})],
    ),
    "two tasks share one unique key string": (
        "CHECK_UNIQUE_KEYS_PER_TASK",
        [
            (
                "enqueue_unique",
                {"task": "work", "key": "u1", "conflict": "keep", "shared": False, "script": []},
            ),
            (
                "enqueue_unique",
                {"task": "work_b", "key": "u1", "conflict": "keep", "shared": False, "script": []},
            ),
            ("drain", {}),
        ],
    ),
    "an ordered key's next job runs while the one before waits for a signal": (
        "CHECK_ORDERED_KEY_ACROSS_WAIT",
        [("enqueue_waiter", {"waits": 1, "script": [], "keyed": "ordered"}), ("drain", {})],
    ),
    "a chord over the payload limit runs its body": (
        "CHECK_CHORD_OVER_PAYLOAD",
        [("enqueue_chord", {"n": 3, "big": True, "scripts": [[]] * 5}), ("drain", {})],
    ),
    "a requeued cancelled chain link runs without its parent's result": (
        "CHECK_RETRIED_LINK_TAKES_ITS_RESULT",
        [
            ("enqueue_chain", {"scripts": [["permanent"], []]}),
            ("drain", {}),
            ("retry", {"pick": 0, "link": True}),
            ("drain", {}),
        ],
    ),
    "a chain link cancelled by a person, requeued, runs without its parent's result": (
        "CHECK_RETRIED_LINK_TAKES_ITS_RESULT",
        [
            ("enqueue_chain", {"scripts": [[], []]}),
            ("cancel", {"pick": 1}),
            ("retry", {"pick": 0, "link": True}),
            ("drain", {}),
        ],
    ),
    "a wait child of a pruned dead parent waits for ever": (
        "CHECK_PRUNED_WAIT_PARENT",
        [
            ("enqueue_plain", {"script": ["permanent"], "attempts": 1, "delay": 0}),
            ("drain", {}),
            ("enqueue_dependent", {"picks": [0], "policy": "wait", "script": []}),
            ("advance", {"seconds": 61}),
            ("prune", {"finished": 45.5, "dead": 45.5}),
            ("maintenance", {}),
        ],
    ),
    "a wait_for timeout never fires under app.drain()": (
        "CHECK_WAIT_TIMEOUT_UNDER_DRAIN",
        [
            ("enqueue_waiter", {"waits": 1, "script": [], "keyed": ""}),
            ("drain", {}),
            ("advance", {"seconds": 100}),
            ("drain", {}),
        ],
    ),
    "app.batch(id=...) closes the batch it adds to": (
        "CHECK_BATCH_BY_ID_STAYS_OPEN",
        [
            (
                "enqueue_batch",
                {"scripts": [], "on_success": False, "on_complete": True, "end": "open"},
            ),
            ("add_to_batch", {"pick": 0, "scripts": [[]], "fails": False}),
        ],
    ),
    "a parked job whose unique key was taken can never resume": (
        "CHECK_PARKED_UNIQUE_JOB_RESUMES",
        [
            ("enqueue_waiter", {"waits": 1, "script": [], "keyed": "unique"}),
            ("drain", {}),
            ("enqueue_waiter", {"waits": 1, "script": [], "keyed": "unique"}),
            ("signal", {"pick": 0, "payload": 1, "live": True, "twice": False, "name": "go"}),
            ("drain", {}),
        ],
    ),
    "a pruned batch member drops out of the batch's counts": (
        "CHECK_BATCH_COUNTS_KEEP_PRUNED",
        [
            (
                "enqueue_batch",
                {
                    "scripts": [[], ["fail"]],
                    "on_success": False,
                    "on_complete": True,
                    "end": "close",
                },
            ),
            ("drain", {}),
            ("advance", {"seconds": 5}),
            ("prune", {"finished": 0.5, "dead": 0.5}),
            ("advance", {"seconds": 61}),
            ("drain", {}),
        ],
    ),
}
