"""``skiplock task ...``: list APP's tasks with their options, pause and resume task names
everywhere."""

from __future__ import annotations

from typing import Any

import click

from .._task import Task
from .._task_options import listing
from .._typed import argument_schemas
from .output import echo, echo_json, json_option
from .support import Group, Seconds, load_app, run_async


@click.group(cls=Group)
def task() -> None:
    """List APP's tasks, pause and resume task names everywhere."""


LISTED_ORDER = (
    "name",
    "queue",
    "priority",
    "lane",
    "max_attempts",
    "timeout_s",
    "executor",
    "visibility_timeout_s",
    "retry",
    "permanent",
    "breaker",
    "concurrency_key",
    "key_limit",
    "key_weight",
    "fair",
    "ordering_key",
    "ordering_on_dead",
    "unique_key",
    "on_conflict",
    "unique_while",
    "unique_scope",
    "unique_for_s",
    "debounce_s",
    "keep_result",
    "version",
    "job_log",
    "job_log_bytes",
)
"""Where ``task list --json`` puts the options it knows first; the record
(``_task_options``) says which options are listed and how, and one it lists that is not
named here follows these."""


def task_details(task: Task[Any, Any], schedules: list[str]) -> dict[str, Any]:
    """One registered task's options as ``task list --json`` prints them."""
    listed = listing(task)
    details = {key: listed.pop(key) for key in LISTED_ORDER}
    schemas = argument_schemas(task.fn, task.typed)
    return {**details, **listed, "is_async": task.is_async, "schedules": schedules, **schemas}


def _line(details: dict[str, Any]) -> str:
    retry = details["retry"]
    breaker = details["breaker"]
    timeout = details["timeout_s"]
    parts = [
        f"{details['name']}",
        f"queue={details['queue']}",
        f"priority={details['priority']}",
        f"max_attempts={details['max_attempts']}",
        f"timeout={'none' if timeout is None else f'{timeout:g}s'}",
        f"retry={retry['base_s']:g}s..{retry['cap_s']:g}s" + (" jitter" if retry["jitter"] else ""),
    ]
    if details["visibility_timeout_s"] is not None:
        parts.append(f"lease={details['visibility_timeout_s']:g}s")
    if breaker is not None:
        parts.append(
            f"breaker={breaker['threshold']} in {breaker['window_s']:g}s "
            f"(cool-down {breaker['cooldown_s']:g}s)"
        )
    if details["permanent"]:
        parts.append(f"permanent={','.join(details['permanent'])}")
    parts += _keys_shown(details)
    if details["version"] != 1:
        parts.append(f"version={details['version']}")
    if not details["keep_result"]:
        parts.append("keep_result=no")
    if details["schedules"]:
        parts.append(f"schedules={','.join(details['schedules'])}")
    typed = [name for name, schema in details["arguments"].items() if schema]
    typed += ["return"] if details["returns"] is not None else []
    if typed:
        parts.append(f"typed={','.join(typed)}")
    return " ".join(parts)


def _keys_shown(details: dict[str, Any]) -> list[str]:
    """The key options a task carries, in ``task list``'s words (those at their defaults
    are left out)."""
    parts = []
    if details["concurrency_key"] is not None:
        parts.append(f"concurrency_key={details['concurrency_key']}")
        if details["key_limit"] is not None:
            parts.append(f"key_limit={details['key_limit']}")
        if details["key_weight"] is not None:
            parts.append(f"key_weight={details['key_weight']}")
        if not details["fair"]:
            parts.append("fair=no")
    if details["ordering_key"] is not None:
        parts.append(f"ordering_key={details['ordering_key']}")
        parts.append(f"ordering_on_dead={details['ordering_on_dead']}")
    if details["unique_key"] is not None:
        parts.append(f"unique_key={details['unique_key']} ({details['unique_while']})")
        if details["unique_scope"] != "task":
            parts.append(f"unique_scope={details['unique_scope']}")
        if details["unique_for_s"] is not None:
            parts.append(f"unique_for={details['unique_for_s']:g}s")
        if details["on_conflict"] != "keep" and details["debounce_s"] is None:
            parts.append(f"on_conflict={details['on_conflict']}")  # a debounce replaces
    if details["debounce_s"] is not None:
        parts.append(f"debounce={details['debounce_s']:g}s")
    return parts


@task.command(name="list")
@click.argument("app_spec", metavar="APP")
@json_option
def task_list(app_spec: str, as_json: bool) -> None:
    """APP's registered tasks and their options.

    Read from APP as imported; the database is not opened."""
    app = load_app(app_spec)
    listed = []
    for name in sorted(app.tasks):
        schedules = sorted(s.id for s in app.schedules.values() if s.task.name == name)
        listed.append(task_details(app.tasks[name], schedules))
    if as_json:
        echo_json({"tasks": listed})
        return
    for details in listed:
        echo(_line(details))
    echo(f"{len(listed)} tasks")


@task.command(name="pause")
@click.argument("app_spec", metavar="APP")
@click.argument("name")
@click.option(
    "--for", "for_s", type=Seconds(0.1), help="Seconds the pause lasts (default: until resumed)."
)
def task_pause(app_spec: str, name: str, for_s: float | None) -> None:
    """Stop every worker claiming jobs of task NAME."""
    app = load_app(app_spec)
    run_async(app, lambda: app.pause_task(name, for_s=for_s))
    echo(f"task {name} paused" + (f" for {for_s:g}s" if for_s else ""))


@task.command(name="resume")
@click.argument("app_spec", metavar="APP")
@click.argument("name")
def task_resume(app_spec: str, name: str) -> None:
    """Lift task NAME's pause (a person's or its breaker's)."""
    app = load_app(app_spec)
    resumed = run_async(app, lambda: app.resume_task(name))
    echo(f"task {name} resumed" if resumed else f"task {name} was not paused")
