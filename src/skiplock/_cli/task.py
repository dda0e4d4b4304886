"""``skiplock task ...``: list APP's tasks with their options, pause and resume task names
everywhere."""

from __future__ import annotations

from typing import Any

import click

from .._task import Task, seconds_of
from .output import echo_json, json_option
from .support import Group, Seconds, load_app, run_async


@click.group(cls=Group)
def task() -> None:
    """List APP's tasks, pause and resume task names everywhere."""


def task_details(task: Task[Any, Any], schedules: list[str]) -> dict[str, Any]:
    """One registered task's options as ``task list --json`` prints them."""
    breaker = task.breaker
    return {
        "name": task.name,
        "queue": task.queue,
        "priority": task.priority,
        "max_attempts": task.max_attempts,
        "timeout_s": task.timeout,
        "visibility_timeout_s": task.visibility_timeout,
        "retry": {
            "base_s": task.retry.base_s,
            "cap_s": task.retry.cap_s,
            "jitter": task.retry.jitter,
        },
        "permanent": [f"{e.__module__}.{e.__qualname__}" for e in task.permanent],
        "breaker": None
        if breaker is None
        else {
            "threshold": breaker.threshold,
            "window_s": breaker.window_s,
            "cooldown_s": breaker.cooldown_s,
        },
        "unique_key": task.unique_key
        if task.unique_key is None or isinstance(task.unique_key, str)
        else "(a function of the arguments)",
        "on_conflict": task.on_conflict,
        "unique_while": task.unique_while,
        "unique_for_s": None if task.unique_for is None else seconds_of(task.unique_for),
        "debounce_s": None if task.debounce is None else seconds_of(task.debounce),
        "keep_result": task.keep_result,
        "is_async": task.is_async,
        "schedules": schedules,
    }


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
    if details["unique_key"] is not None:
        parts.append(f"unique_key={details['unique_key']} ({details['unique_while']})")
        if details["unique_for_s"] is not None:
            parts.append(f"unique_for={details['unique_for_s']:g}s")
    if details["debounce_s"] is not None:
        parts.append(f"debounce={details['debounce_s']:g}s")
    if not details["keep_result"]:
        parts.append("keep_result=no")
    if details["schedules"]:
        parts.append(f"schedules={','.join(details['schedules'])}")
    return " ".join(parts)


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
        click.echo(_line(details))
    click.echo(f"{len(listed)} tasks")


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
    click.echo(f"task {name} paused" + (f" for {for_s:g}s" if for_s else ""))


@task.command(name="resume")
@click.argument("app_spec", metavar="APP")
@click.argument("name")
def task_resume(app_spec: str, name: str) -> None:
    """Lift task NAME's pause (a person's or its breaker's)."""
    app = load_app(app_spec)
    resumed = run_async(app, lambda: app.resume_task(name))
    click.echo(f"task {name} resumed" if resumed else f"task {name} was not paused")
