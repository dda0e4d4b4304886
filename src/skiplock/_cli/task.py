"""``skiplock task ...``: pause and resume task names everywhere."""

from __future__ import annotations

import click

from .support import Seconds, load_app, run_async


@click.group()
def task() -> None:
    """Pause and resume task names everywhere."""


@task.command(name="pause")
@click.argument("app_spec", metavar="APP")
@click.argument("name")
@click.option("--for", "for_s", type=Seconds(0.1), help="Seconds (default: until resumed).")
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
