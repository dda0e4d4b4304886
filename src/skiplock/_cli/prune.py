"""``skiplock prune``: apply the retentions now, not at the workers' next pruning pass.

``--dry-run`` counts what would go and deletes nothing; the real run deletes by the same
condition (one SQL text for both, ``_PAST_RETENTION``), so it takes the rows the dry run
counted, plus any that aged past the retention in between."""

from __future__ import annotations

import sys
from typing import Any

import click

from .._config import WorkerConfig
from .output import echo, echo_json, json_option
from .support import (
    Down,
    Seconds,
    app_command,
    app_for,
    database_option,
    each_database,
    report_down,
    run_async,
)

_DEFAULTS = WorkerConfig()


def in_words(seconds: float) -> str:
    """``604800`` -> ``7 days``: a retention as a person says it."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"


@app_command(None, "prune")
@click.option(
    "--finished-age",
    "finished_age_s",
    type=Seconds(0),
    default=_DEFAULTS.retention_finished_s,
    show_default=in_words(_DEFAULTS.retention_finished_s),
    help="Delete succeeded and cancelled jobs that finished more than this many seconds ago "
    "(the workers' --retention-finished).",
)
@click.option(
    "--dead-age",
    "dead_age_s",
    type=Seconds(0),
    default=_DEFAULTS.retention_dead_s,
    show_default=in_words(_DEFAULTS.retention_dead_s),
    help="Delete dead jobs that died more than this many seconds ago "
    "(the workers' --retention-dead).",
)
@click.option(
    "--audit-age",
    "audit_age_s",
    type=Seconds(0),
    default=_DEFAULTS.retention_audit_s,
    show_default=in_words(_DEFAULTS.retention_audit_s),
    help="Delete audit trail entries written more than this many seconds ago "
    "(the workers' --retention-audit).",
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@database_option
@json_option
def prune_command(
    app_spec: str,
    url: str | None,
    finished_age_s: float,
    dead_age_s: float,
    audit_age_s: float,
    dry_run: bool,
    database: str | None,
    as_json: bool,
) -> None:
    """Delete finished jobs and audit trail entries past their retention now.

    Pending and running jobs never go; --dry-run counts what the real run would delete.
    With several databases, each in turn (or --database alone), a line each."""
    app = app_for(app_spec, url)

    async def preview(name: str) -> tuple[int, dict[str, int] | None, int]:
        jobs = await app.prune_preview(
            finished_age_s=finished_age_s, dead_age_s=dead_age_s, database=name
        )
        return (
            sum(jobs.values()),
            jobs,
            await app.prune_audit_preview(age_s=audit_age_s, database=name),
        )

    async def prune(name: str) -> tuple[int, dict[str, int] | None, int]:
        jobs = await app.prune(finished_age_s=finished_age_s, dead_age_s=dead_age_s, database=name)
        return jobs, None, await app.prune_audit(age_s=audit_age_s, database=name)

    parts = run_async(app, lambda: each_database(app, preview if dry_run else prune, database))
    for name, part in parts:
        if isinstance(part, Down):
            continue
        count, by_state, audited = part
        _report(
            app.directory.several,
            name,
            (count, by_state, audited),
            (finished_age_s, dead_age_s, audit_age_s),
            dry_run,
            as_json,
        )
    if report_down(parts, as_json=as_json):
        for down in (part for _, part in parts if isinstance(part, Down)):
            if as_json:
                echo_json({"database": down.database, "error": down.error})
        sys.exit(1)


def _report(
    several: bool,
    database: str,
    done: tuple[int, dict[str, int] | None, int],
    ages: tuple[float, float, float],
    dry_run: bool,
    as_json: bool,
) -> None:
    """One database's prune, said as ever (several databases: its name first; in JSON a
    ``database`` key, an object a line)."""
    count, by_state, audited = done
    finished_age_s, dead_age_s, audit_age_s = ages
    if as_json:
        report: dict[str, Any] = {
            "dry_run": dry_run,
            "jobs": count,
            "by_state": by_state,
            "audit_entries": audited,
            "finished_age_s": finished_age_s,
            "dead_age_s": dead_age_s,
            "audit_age_s": audit_age_s,
            "database": database,
        }
        echo_json(report)
        return
    named = f"database {database}: " if several else ""
    rule = (
        f"succeeded or cancelled more than {in_words(finished_age_s)} ago, "
        f"dead more than {in_words(dead_age_s)} ago"
    )
    audit = f"{audited} audit trail entries (written more than {in_words(audit_age_s)} ago)"
    if by_state is None:
        echo(f"{named}deleted {count} jobs ({rule}) and {audit}")
        return
    states = " ".join(f"{state}={n}" for state, n in sorted(by_state.items()))
    echo(
        f"{named}would delete {count} jobs ({rule})"
        + (f": {states}" if states else "")
        + f"; {audit}"
    )
