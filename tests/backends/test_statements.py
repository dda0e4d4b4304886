"""The two SQL modules name the same operations alike, and PostgreSQL's table leaves none out."""

from __future__ import annotations

from dataclasses import fields
from importlib import resources
from types import ModuleType

from skiplock._backends import sql_files
from skiplock._backends.postgres import statements as postgres_sql
from skiplock._backends.sqlite import statements as sqlite_sql
from skiplock._job import JobState

DIALECT_ONLY = {
    # PostgreSQL inserts by unnest or COPY, and serialises migrations with an advisory lock;
    # its queue claim is one LATERAL statement where SQLite builds a branch per queue.
    "COPY_COLUMNS",
    "JOB_COPY_PREPARE",
    "JOB_INSERT_MANY",
    "MIGRATIONS_LOCK",
    # PostgreSQL's number among several databases (issue 46): SQLite serves one machine.
    "DATABASE_NUMBER",
    "DATABASE_NUMBER_TABLE",
    "DATABASE_NUMBER_READ",
    # PostgreSQL checks a new pool's session, and prices sorts or sequential scans out for one
    # transaction behind a pooler (SQLite has one connection, its settings its own).
    "SESSION_CHECK",
    "SORT_OFF_IN_TRANSACTION",
    "SEQSCAN_OFF_IN_TRANSACTION",
    # PostgreSQL makes the schema its tables go in (SQLite's file is the database).
    "SCHEMA_CREATE",
    "JOB_GET_AVAILABLE_IN_QUEUES",
    # PostgreSQL's ordinary claims name the live generations they read, and return the pointer
    # with their rows (storage/sight.py); SQLite has one live table.
    "CLAIM_WITH_POINTER",
    # SQLite inserts by multi-row VALUES (ids from the last rowid), checks bounds before it,
    # and watches its file's data_version for commits (a first read opens the WAL it watches).
    "DATA_VERSION",
    "SCHEMA_PEEK",
    "JOB_INSERT",
    "JOB_INSERT_ONE",
    "JOB_INSERT_ROW",
    "JOB_INSERT_ROWS",
    "JOB_INSERT_UNIQUE",
    "LAST_INSERT_ID",
    "QUEUE_DEPTH_LIMIT",
    # SQLite writes one row a statement, so an outcome with no result skips those columns.
    "JOB_SET_STATE_KEEPING_RESULT",
    # PostgreSQL writes a few outcomes and releases their children in one statement on the
    # generic plan's session (SQLite releases in the completion's transaction, by its flow).
    "JOB_SET_STATE_AND_RELEASE",
    # SQLite copies a finished job into its day's table, then deletes the live rows copied
    # (PostgreSQL's partitions move the row with the update).
    "JOB_DELETE_MOVED",
    # PostgreSQL's keyed claim is one statement (its walk in a function); SQLite walks the keys in
    # Python under its write lock (sqlite/keys.py), then claims the ids it picked.
    "JOB_GET_AVAILABLE_KEYED",
    "JOB_CLAIM_IDS",
    # SQLite's unique index cannot name a time: a succeeded job whose window has passed lets
    # its key go first (its flag cleared), where PostgreSQL's insert takes the key row over.
    "JOB_KEY_PASSED",
    "JOB_KEYS_PASSED",
    # PostgreSQL reads the jobs in waiting, and the history's reclaims and percentiles, apart
    # from the live partition's (postgres/storage/reads.py: the rest, off the live segments).
    "JOB_STATS_WAITING",
    "JOB_STATS_RECLAIMS_REST",
    "JOB_STATS_PERCENTILES_REST",
}


def statements(module: ModuleType) -> set[str]:
    named = {
        name
        for name, value in vars(module).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str)
    }
    if hasattr(module, "QUERIES"):  # PostgreSQL's: read from queries/*.sql, workflows' apart
        named |= set(module.QUERIES) - {f.name for f in fields(module.WorkflowStatements)}
    return named


SQLITE_ELSEWHERE = (
    "engine.sql",
    "history.sql",
    "ids.sql",
    "key_walk.sql",
    "variants.sql",
    "workflow.sql",
)
"""SQLite's statement files whose PostgreSQL twins are in modules this test does not read, or
that have none (SQLite's own transactions and pragmas, the day tables, the id ledger, the keyed
claim's walk, the pieces SQLite's Python repeats, the workflows)."""


def sqlite_statements() -> set[str]:
    """The names of SQLite's statements (``sqlite/queries/*.sql``) that PostgreSQL's
    ``postgres_sql`` names."""
    folder = resources.files("skiplock._backends.sqlite").joinpath("queries")
    return {
        name
        for file in folder.iterdir()
        if file.name.endswith(".sql") and file.name not in SQLITE_ELSEWHERE
        for name in sql_files.parse_statements(file.read_text(encoding="utf-8"), file.name)
    }


def test_both_dialects_name_their_statements_alike() -> None:
    assert statements(postgres_sql) - DIALECT_ONLY == sqlite_statements() - DIALECT_ONLY


def test_postgres_statements_table_has_every_statement() -> None:
    table = {f.name for f in fields(postgres_sql.Statements)}
    assert table == statements(postgres_sql) - {"COPY_COLUMNS"}
    filled = postgres_sql.Statements.for_schema("x")
    assert all("{s}" not in getattr(filled, name) for name in table)


def test_each_dialect_names_the_live_and_final_states_once_as_jobstate_does() -> None:
    for module in (postgres_sql, sqlite_sql):
        assert sql_list(JobState.live()) == module._LIVE
        assert sql_list(JobState.final()) == module._FINAL


def sql_list(states: frozenset[JobState]) -> str:
    order = list(JobState)
    return "(" + ", ".join(f"'{s.value}'" for s in sorted(states, key=order.index)) + ")"
