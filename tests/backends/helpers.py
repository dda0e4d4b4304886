"""What the backend test modules share, so none imports another: a new job's fields, a claim's
parameters, dead jobs made through the backend's own verbs, and a row written around them."""

from __future__ import annotations

import ast
import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import asyncpg

import skiplock
from skiplock._backends import Backend
from skiplock._backends.params import ClaimParams, JobHeartbeatManyParams, JobInsertManyParams
from skiplock._job import Completion, Disposition, NewJob

from ..helpers import server_url


def new_job(task: str = "t", **overrides: object) -> NewJob:
    fields: dict[str, object] = {
        "task": task,
        "queue": "default",
        "args_json": "[1]",
        "kwargs_json": '{"k": "v"}',
        "priority": 0,
        "max_attempts": 3,
    }
    fields.update(overrides)
    return NewJob(**fields)  # type: ignore[arg-type]


def claim(
    limit: int = 10, queues: tuple[str, ...] | None = None, token: str = "tok"
) -> ClaimParams:
    return ClaimParams(
        queues=queues,
        limit=limit,
        worker="w1",
        lease_token=token,
        default_lease=60.0,
        lease_margin=5.0,
    )


async def bury_many(
    backend: Backend, task: str, errors: list[str], queue: str = "default"
) -> list[int]:
    """Dead jobs of ``task`` in one batch, one per error message, oldest (lowest id) first."""
    ids = await backend.job_insert_many(
        JobInsertManyParams([new_job(task, queue=queue) for _ in errors])
    )
    claimed = {c.id: c for c in await backend.job_get_available(claim(len(ids), (queue,), "bury"))}
    assert set(ids) <= claimed.keys()
    await backend.job_set_state_if_running_many(
        [
            Completion(job_id, claimed[job_id].lease_token, Disposition.DEAD, 0.0, err)
            for job_id, message in zip(ids, errors, strict=True)
            for err in [{"attempt": 1, "message": message, "traceback": None, "at": "x"}]
        ]
    )
    return sorted(ids)


async def write_raw(app: skiplock.App, sqlite_sql: str, pg_sql: str, job_id: int) -> None:
    """Run an UPDATE straight on the table, around skiplock."""
    if app.url.startswith("sqlite"):
        conn = sqlite3.connect(app.url.removeprefix("sqlite:///"))
        with conn:
            conn.execute(sqlite_sql, (job_id,))
        conn.close()
        return
    pg = await asyncpg.connect(server_url(app.url))
    try:
        schema = app.url.rsplit("schema=", 1)[1]
        await pg.execute(pg_sql.replace("skiplock_jobs", f'"{schema}".skiplock_jobs'), job_id)
    finally:
        await pg.close()


async def read_raw(app: skiplock.App, statement: str) -> list[tuple[Any, ...]]:
    """Read rows straight from skiplock's tables (``statement`` names them unqualified)."""
    if app.url.startswith("sqlite"):
        conn = sqlite3.connect(app.url.removeprefix("sqlite:///"))
        try:
            return [tuple(row) for row in conn.execute(statement).fetchall()]
        finally:
            conn.close()
    pg = await asyncpg.connect(server_url(app.url))
    try:
        schema = app.url.rsplit("schema=", 1)[1]
        await pg.execute(f'SET search_path = "{schema}"')
        return [tuple(row) for row in await pg.fetch(statement)]
    finally:
        await pg.close()


@contextlib.asynccontextmanager
async def migrated_pg(pg_url: str) -> AsyncIterator[tuple[skiplock.App, str, asyncpg.Connection]]:
    """A migrated PostgreSQL schema: its app, the schema's name, and a session of its own
    (to read plans on, or to hold a row lock with); both closed at the end."""
    app = skiplock.App(pg_url)
    await app.migrate()
    conn = await asyncpg.connect(server_url(pg_url))
    try:
        yield app, pg_url.rsplit("schema=", 1)[1], conn
    finally:
        await conn.close()
        await app.close()


def keyed_claim_walk() -> str:
    """The statement inside ``skiplock_keyed_claim`` as ``migrations/0028.sql`` makes it (the
    function's body, whole text; no later migration replaces it), ``{s}`` still in it: the
    plan tests that EXPLAIN it (test_query_plan.py, test_lane_shape.py) read what the
    database runs. Its parameters are the function's, $1 to $12 (``JOB_GET_AVAILABLE_KEYED``
    calls the function, so no code of the package runs the walk on its own)."""
    migration = resources.files("skiplock._backends.postgres").joinpath("migrations", "0028.sql")
    text = migration.read_text(encoding="utf-8")
    return text.partition("    RETURN QUERY\n")[2].partition(";\nEND\n$$;")[0].strip()


def keyed(key: str | None = None, *, keep: bool = False, task: str = "t") -> NewJob:
    """A job of ``task`` holding ``key`` (kept past success with ``keep``)."""
    return NewJob(task, "default", "[]", "{}", 0, 3, unique_key=key, unique_succeeded=keep)


async def assert_upgraded_jobs_hold(app: skiplock.App, ids: list[int]) -> None:
    """What an upgrade of the version 10 rows the storage tests write must keep: the keys of
    the pending, running and kept jobs (ids[0:3], of tasks a, b and c) still held, each now
    its task's own (another task's job of the same key string is a job of its own), the spent
    and dead ones free, new ids after the old ones, a result and an error readable."""
    backend = await app.backend()
    held = [keyed("k-pending", task="a"), keyed("k-running", task="b")]
    held.append(keyed("k-kept", keep=True, task="c"))
    assert await backend.job_insert_many(JobInsertManyParams(held)) == ids[:3]
    others = [keyed("k-pending", task="t"), keyed("k-free", task="d"), keyed("k-dead", task="f")]
    fresh = await backend.job_insert_many(JobInsertManyParams(others))
    assert min(fresh) > max(ids) and len(set(fresh)) == 3
    newer = keyed("k-pending", task="a")
    newer.args_json, newer.on_duplicate = "[2]", "replace"  # the old pending job, replaced
    assert await backend.job_insert_many(JobInsertManyParams([newer])) == ids[:1]
    assert (await app.get_job(ids[0])).args == [2]
    assert (await app.get_job(ids[2])).result == {"x": 1}
    assert (await app.get_job(ids[5])).errors[-1]["message"] == "boom"


async def seed_every_state(app: skiplock.App) -> dict[str, list[int]]:
    """Jobs in every state on four queues: ready and scheduled, claimed ahead and running, in
    waiting (a chain's second step), succeeded, cancelled and dead (ids by what they are)."""

    @app.task(name="a", queue="q1")
    async def a(n: int = 0) -> None: ...

    @app.task(name="b", queue="q2")
    async def b(n: int = 0) -> None: ...

    @app.task(name="c", queue="q4")
    async def c(n: int = 0) -> None: ...

    backend = await app.backend()
    q1 = [(await a.using(correlation_id=f"order-{i}").aenqueue(i)).id for i in range(6)]
    scheduled = (await b.using(run_after=timedelta(hours=1)).aenqueue(9)).id
    q2 = [(await b.aenqueue(i)).id for i in range(5)]
    claimed = await backend.job_get_available(claim(2, ("q1",), "reading"))
    started = await backend.job_get_available(claim(1, ("q1",), "started"))
    beat = [(j.id, j.lease_token) for j in started]
    await backend.job_heartbeat_many(
        JobHeartbeatManyParams(beat, 60.0, 5.0, started=frozenset(beat))
    )
    done = await backend.job_get_available(claim(3, ("q2",), "done"))
    await backend.job_set_state_if_running_many(
        [Completion(j.id, j.lease_token, Disposition.SUCCEED) for j in done]
    )
    dead = await bury_many(backend, "a", ["RuntimeError: boom", "RuntimeError: boom 2"], "q3")
    await app.cancel_job(q1[-1])
    link = await skiplock.chain(c.s(1), c.s()).aenqueue()
    return {
        "q1": q1,
        "q2": [scheduled, *q2],
        "claimed": [j.id for j in claimed],
        "started": [j.id for j in started],
        "succeeded": [j.id for j in done],
        "dead": dead,
        "cancelled": [q1[-1]],
        "chain": link.ids,
    }


STATEMENT_WORDS = (
    "SET|RESET|SHOW|LOCK|TRUNCATE|ANALYZE|VACUUM|EXPLAIN|COPY|GRANT|REVOKE|NOTIFY|LISTEN|UNLISTEN"
)
"""Words that open a statement but may stand in a sentence too ("could not LOCK the table",
"a LOCK TABLE, a migration"): SQL text where they open it (at its start, a line's, or after
``;`` or ``(``) or are followed by SQL's shape (an upper-case word and then a name, a
``{part}`` or a parenthesis; a ``{part}``; a parenthesis; or ``name =`` / ``name TO``)."""


def sql_words(clause_words: str) -> re.Pattern[str]:
    """What makes a string SQL text: one of ``clause_words`` (``A|B|...``) wherever it stands,
    upper case as the statements write them (an English "from" in a message is not SQL), or one
    of ``STATEMENT_WORDS`` opening a statement; the word is the match's one group that took part
    (``sql_word``). The dialect packages' "no string holds SQL" tests use it with their own
    clause words (test_postgres_statements.py, test_sqlite_statements.py)."""
    return re.compile(
        rf"\b({clause_words})\b"
        rf"|(?:^|[;(])\s*({STATEMENT_WORDS})\b"
        rf"|\b({STATEMENT_WORDS})\s+"
        r"(?:[A-Z][A-Z_]*\s+[\w\"{(]|[{(]|[a-z_][a-z0-9_.]*\s*(?:=|TO\b))",
        re.MULTILINE,
    )


SQL_WORD = sql_words(
    "SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|PRAGMA|BEGIN|COMMIT|ROLLBACK|SAVEPOINT"
    "|RELEASE|WHERE|FROM"
)
"""What makes a string of a dialect package's Python SQL text, for the "no string holds SQL"
tests (test_postgres_statements.py, test_sqlite_statements.py)."""


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants in ``tree`` (a module's, a class's, a function's,
    and the one under an assignment)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            for before, after in zip([None, *body], body, strict=False):
                is_doc = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                if is_doc and (before is None or isinstance(before, (ast.Assign, ast.AnnAssign))):
                    found.add(id(after.value))
    return found


def sql_strings(package: Path) -> list[str]:
    """Every string constant in ``package``'s Python (docstrings aside) that says a word of
    SQL, as ``file:line: text``: a dialect's statements live in its ``.sql`` files only."""
    found = []
    for file in sorted(package.rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        docs = docstrings(tree)
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and id(node) not in docs and SQL_WORD.search(text):
                found.append(f"{file.relative_to(package)}:{node.lineno}: {text[:60]!r}")
    return found
