"""The task options record (``_task_options.TaskOptions``): each option declared once, and
the explicit signatures of ``App.task`` and ``Task.using`` kept in step with it.

The public signatures stay explicit keyword parameters (what IDEs and mypy show), so each is
one copy of the names; ``signature_drift`` is the check that they and the record agree (a
name, a default, an annotation), and each test below shows it can fail.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skiplock import App, ConfigurationError, RetryPolicy
from skiplock._cli.task import LISTED_ORDER, task_details
from skiplock._task import Task
from skiplock._task_options import (
    DECLARED,
    USING,
    Option,
    TaskOptions,
    declared,
    django_options,
    listing,
    options,
    overrides,
)


def _with_none(annotation: str) -> str:
    return annotation if annotation.endswith("| None") else f"{annotation} | None"


def signature_drift(
    fn: Callable[..., Any], edge: str, record: type[TaskOptions] = TaskOptions
) -> list[str]:
    """Where ``fn``'s keyword parameters and the options of ``record`` for ``edge``
    (``task``: ``App.task``, ``using``: ``Task.using``) disagree: a name on one side only, a
    default or an annotation that differs. Empty when they agree."""
    params = {
        p.name: p for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY
    }
    wanted = {
        f.name: (f, f.metadata["option"])
        for f in dataclasses.fields(record)
        if (f.metadata["option"].declared if edge == "task" else f.metadata["option"].using)
    }
    drift = [f"{name}: in the record, not the signature" for name in wanted.keys() - params]
    drift += [f"{name}: in the signature, not the record" for name in params.keys() - wanted]
    for name in wanted.keys() & params.keys():
        f, o = wanted[name]
        param = params[name]
        if edge == "task":
            annotation = o.given or str(f.type)
            if name == "name":  # the App names a task from its function when not given
                annotation, default = "str | None", None
            elif f.default is not dataclasses.MISSING:
                default = f.default
            else:
                assert f.default_factory is not dataclasses.MISSING
                default = f.default_factory()
            given = o.edge(param.default) if o.edge is not None else param.default
        else:  # using: None is "unchanged"
            annotation, default, given = o.given or _with_none(str(f.type)), None, param.default
        if given != default or type(given) is not type(default):
            drift.append(f"{name}: default {param.default!r}, the record's {default!r}")
        if param.annotation != annotation:
            drift.append(f"{name}: annotation {param.annotation!r}, the record's {annotation!r}")
    return sorted(drift)


def test_app_task_signature_is_the_records() -> None:
    assert signature_drift(App.task, "task") == []
    (bare, with_options) = typing.get_overloads(App.task)
    assert signature_drift(with_options, "task") == []
    assert list(inspect.signature(bare).parameters) == ["self", "fn"]


def test_task_using_signature_is_the_records() -> None:
    assert signature_drift(Task.using, "using") == []


def test_the_drift_check_fails_on_an_option_missing_from_a_signature() -> None:
    def task(self: Any, fn: Any = None, /, *, name: str | None = None) -> None: ...

    drift = signature_drift(task, "task")
    assert "queue: in the record, not the signature" in drift
    assert "fair: in the record, not the signature" in drift


def test_the_drift_check_fails_on_a_parameter_the_record_lacks() -> None:
    def using(self: Any, *, queue: str | None = None, colour: str | None = None) -> None: ...

    assert "colour: in the signature, not the record" in signature_drift(using, "using")


def test_the_drift_check_fails_on_a_default_or_an_annotation_that_differs() -> None:
    def task(
        self: Any, *, priority: int = 1, queue: str | None = "default", retry: Any = None
    ) -> None: ...

    drift = signature_drift(task, "task")
    assert "priority: default 1, the record's 0" in drift
    assert "queue: annotation 'str | None', the record's 'str'" in drift
    assert "retry: annotation 'Any', the record's 'RetryPolicy | None'" in drift

    def using(self: Any, *, fair: bool | None = False) -> None: ...

    assert "fair: default False, the record's None" in signature_drift(using, "using")


def test_a_new_option_in_the_record_is_drift_until_the_signatures_take_it() -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Wider(TaskOptions):
        colour: str = dataclasses.field(default="red", metadata={"option": Option(using=True)})

    for fn, edge in ((App.task, "task"), (Task.using, "using")):
        assert signature_drift(fn, edge, Wider) == ["colour: in the record, not the signature"]


def test_every_field_declares_its_option_and_every_option_has_an_edge() -> None:
    for f, o in options():
        assert isinstance(o, Option), f.name
        assert o.declared or o.using, f"{f.name}: neither @app.task nor using() takes it"
        assert not (o.edge and not o.given), f"{f.name}: a conversion needs its edge's type"
    assert set(inspect.signature(App.task).parameters) - {"self", "fn"} == DECLARED
    assert set(inspect.signature(Task.using).parameters) - {"self"} == USING


def test_task_is_the_record_plus_its_function_and_app() -> None:
    names = [f.name for f in dataclasses.fields(TaskOptions)]
    own = [f.name for f in dataclasses.fields(Task) if f.name not in names]
    assert own == ["app", "fn", "_fitting_shapes", "is_async", "typed"]
    assert issubclass(Task, TaskOptions)


def test_the_record_checks_each_option_at_the_edge() -> None:
    with pytest.raises(ConfigurationError, match=r"^priority=True: "):
        TaskOptions(name="t", priority=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"^task 't': queue"):
        TaskOptions(name="t", queue="")
    with pytest.raises(ConfigurationError, match=r"key_weight=2: weighs the turns"):
        TaskOptions(name="t", key_weight=2)
    made = TaskOptions(name="t", unique_key="u", on_duplicate="raise")
    assert (made.on_conflict, made.on_duplicate) == ("reject", None)


def test_declared_applies_each_edges_conversion() -> None:
    given = {name: None for name in DECLARED} | {"queue": "q", "upcast": None, "retry": None}
    made = declared(given)
    assert made["retry"] == RetryPolicy() and made["upcast"] == {} and made["queue"] == "q"
    assert set(made) == DECLARED


def test_overrides_are_the_options_given() -> None:
    given = dict.fromkeys(USING) | {"queue": "q", "fair": False, "colour": "red"}
    assert overrides(given) == {"queue": "q", "fair": False}


def test_task_list_shows_every_listed_option_in_its_order(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path}/t.db")
    task = app.task(name="t", concurrency_key=lambda: "k", debounce=2)(lambda: None)
    shown = task_details(task, ["s"])
    assert list(shown) == [*LISTED_ORDER, "is_async", "schedules", "arguments", "returns"]
    assert set(listing(task)) == set(LISTED_ORDER)
    assert shown["concurrency_key"] == "(a function of the arguments)"
    assert shown["debounce_s"] == 2.0 and shown["ordering_on_dead"] is None


def test_djangos_skiplock_options_come_from_the_record() -> None:
    assert django_options("task") == {
        "max_attempts",
        "timeout",
        "retry",
        "permanent",
        "visibility_timeout",
        "breaker",
        "keep_result",
        "job_log",
        "job_log_bytes",
    }
    assert django_options("enqueue") == {
        "unique_key",
        "on_duplicate",
        "unique_while",
        "unique_scope",
    }
    assert django_options("task") <= DECLARED and django_options("enqueue") <= USING
