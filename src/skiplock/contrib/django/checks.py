"""System checks of a SkiplockBackend's ``TASKS[alias]["OPTIONS"]``: a wrong option is a
``manage.py check`` error naming it, not a crash at the first enqueue."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core import checks

from .retention import OPTIONS as RETENTION_OPTIONS
from .retention import retention_problem

OPTIONS = {
    "database": "the DATABASES alias the jobs live in (default: 'default')",
    "schema": "the PostgreSQL schema of skiplock's tables (default: public)",
    "url": "a skiplock database URL, overriding the one built from DATABASES",
    "signed_result_ids": "True: result ids signed with SECRET_KEY, not guessable (default False)",
    **RETENTION_OPTIONS,
}
ENGINES = ("django.db.backends.postgresql", "django.db.backends.sqlite3")


def check_options(alias: str, options: Any) -> Iterator[Any]:
    """Errors ``skiplock.E001``-``E004`` for one backend's OPTIONS."""
    where = f"TASKS[{alias!r}]['OPTIONS']"
    if not isinstance(options, dict):
        yield checks.Error(f"{where} must be a dict", id="skiplock.E001")
        return
    for name in sorted(set(options) - set(OPTIONS)):
        hint = "valid options: " + ", ".join(f"{k} ({v})" for k, v in OPTIONS.items())
        yield checks.Error(f"{where}: unknown option {name!r}", hint=hint, id="skiplock.E002")
    yield from _check_database(where, options.get("database", "default"))
    for name in ("schema", "url"):
        value = options.get(name)
        if value is not None and (not isinstance(value, str) or not value):
            yield checks.Error(f"{where}[{name!r}] must be a non-empty string", id="skiplock.E004")
    for name in RETENTION_OPTIONS:
        problem = retention_problem(name, options.get(name))
        if problem is not None:
            yield checks.Error(f"{where}: {problem}", id="skiplock.E004")
    if not isinstance(options.get("signed_result_ids", False), bool):
        yield checks.Error(
            f"{where}['signed_result_ids'] must be True or False", id="skiplock.E004"
        )


def _check_database(where: str, database: Any) -> Iterator[Any]:
    if database not in settings.DATABASES:
        known = ", ".join(sorted(settings.DATABASES))
        yield checks.Error(
            f"{where}['database'] = {database!r} is not in DATABASES ({known})",
            id="skiplock.E003",
        )
    elif settings.DATABASES[database].get("ENGINE") not in ENGINES:
        yield checks.Error(
            f"{where}['database'] = {database!r}: skiplock needs one of {', '.join(ENGINES)}",
            id="skiplock.E003",
        )


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """``skiplock.E005``: ``PERIODIC_MAX_DELAY_SECONDS`` must be a number of seconds >= 0 (a
    bad value is a ``manage.py check`` error, not a worker that dies at its first sweep)."""
    value = getattr(settings, "PERIODIC_MAX_DELAY_SECONDS", 600)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e9
    if ok:
        return []
    return [
        checks.Error(
            f"PERIODIC_MAX_DELAY_SECONDS = {value!r}: must be a number of seconds >= 0",
            hint="how late a missed @periodic slot may still run (default 600)",
            id="skiplock.E005",
        )
    ]


def check_command_names(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """``skiplock.E007``: another installed app (django-tasks-concurrent, say) also provides
    ``concurrent_worker`` or ``task_worker``: which one runs would be decided by the order
    of ``INSTALLED_APPS``, silently."""
    import os

    from django.apps import apps
    from django.core.management import find_commands, get_commands

    ours = "skiplock.contrib.django"
    mine = set(find_commands(os.path.join(apps.get_app_config("skiplock").path, "management")))
    errors = []
    for config in apps.get_app_configs():
        if config.name == ours:
            continue
        clash = sorted(mine & set(find_commands(os.path.join(config.path, "management"))))
        if not clash:
            continue
        runs = {name: get_commands().get(name) for name in clash}
        errors.append(
            checks.Error(
                f"INSTALLED_APPS has both {config.name!r} and {ours!r}, which both provide "
                + ", ".join(f"manage.py {n} (runs {runs[n]}'s)" for n in clash),
                hint=f"remove {config.name!r} from INSTALLED_APPS (skiplock's commands take "
                "its options)",
                id="skiplock.E007",
            )
        )
    return errors
