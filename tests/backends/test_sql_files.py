"""The loader of SQL kept as SQL (``_backends/sql_files.py``): what a statement or a
migration file must say, and what it refuses."""

from __future__ import annotations

import pytest

from skiplock._backends.sql_files import (
    SqlFileError,
    parse_migration,
    parse_statements,
    quote_identifier,
    with_schema,
)


def test_statements_are_read_by_name_with_their_comments() -> None:
    text = (
        "-- name: JOB_GET\n-- One job by id.\nSELECT * FROM {s}.skiplock_jobs WHERE id = $1\n\n"
        "-- name: JOB_COUNT\nSELECT count(*)\n  FROM {s}.skiplock_jobs\n"
    )
    assert parse_statements(text, "t.sql") == {
        "JOB_GET": "-- One job by id.\nSELECT * FROM {s}.skiplock_jobs WHERE id = $1",
        "JOB_COUNT": "SELECT count(*)\n  FROM {s}.skiplock_jobs",
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("SELECT 1\n", "no '-- name: NAME' line"),
        ("SELECT 1\n-- name: A\nSELECT 1\n", "text before the first"),
        ("-- name: A\n\n-- name: B\nSELECT 1\n", "statement A is empty"),
        ("-- name: A\nSELECT 1\n-- name: A\nSELECT 2\n", "statement A is named twice"),
    ],
)
def test_a_statement_file_that_says_too_little_is_refused(text: str, says: str) -> None:
    with pytest.raises(SqlFileError, match=says):
        parse_statements(text, "t.sql")


def test_a_migration_keeps_its_recorded_name_and_its_text_as_written() -> None:
    migration = parse_migration("-- migration: signal senders, kept results\nALTER x;\n", 23, "m")
    assert (migration.version, migration.name, migration.body) == (
        23,
        "signal senders, kept results",
        "ALTER x;\n",
    )
    with pytest.raises(SqlFileError, match="first line must be"):
        parse_migration("ALTER x;\n", 1, "m")


def test_the_schema_is_the_one_identifier_filled_in_and_it_is_quoted() -> None:
    assert quote_identifier('a"b') == '"a""b"'
    assert with_schema("SELECT 1 FROM {s}.t", "app") == 'SELECT 1 FROM "app".t'
