"""System checks of the OPTIONS, and the migration that applies skiplock's own schema."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command

from skiplock.contrib.django import SkiplockBackend


def _ids(options: Any) -> list[str]:
    backend = SkiplockBackend("custom", {"BACKEND": "x", "OPTIONS": options})
    return [error.id for error in backend.check()]


def test_configured_project_passes_check() -> None:
    call_command("check", fail_level="ERROR")


def test_unknown_option_is_an_error_naming_it() -> None:
    backend = SkiplockBackend("custom", {"OPTIONS": {"databse": "default"}})
    (error,) = backend.check()
    assert error.id == "skiplock.E002"
    assert "'databse'" in error.msg


def test_unknown_database_alias() -> None:
    assert _ids({"database": "nope"}) == ["skiplock.E003"]


def test_bad_schema_and_options_type() -> None:
    assert _ids({"schema": ""}) == ["skiplock.E004"]
    assert _ids(["database"]) == ["skiplock.E001"]


def test_migrate_applies_every_skiplock_migration(backend: Any) -> None:
    """The Django migration and skiplock's own list cannot drift: after ``migrate`` the
    schema is exactly skiplock's latest version."""
    current, latest = backend.app.run_sync(_schema_version(backend.app))
    assert current == latest > 0


async def _schema_version(app: Any) -> tuple[int, int]:
    result: tuple[int, int] = await (await app.backend()).schema_version()
    return result


def test_models_and_migrations_agree() -> None:
    call_command("makemigrations", "skiplock", "--check", "--dry-run", verbosity=0)
