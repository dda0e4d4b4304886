"""The admin's job pages read in short statements, with or without ``ATOMIC_REQUESTS``, and
never hold the live jobs while they count or list the rest (issue 44).

Every session holding a lock on a live segment, ``ACCESS SHARE`` included, makes skiplock's
rotation of the live segments give up. The admin's changelist counts the whole table (twice: the
filtered count and the full one) and lists each filter's values from it; read in one statement
each, the segments stayed locked for as long as it took to read the history, and under
``ATOMIC_REQUESTS`` until the view returned. Where a test needs such a read to stop in its
middle, a session of the test holds ``skiplock_jobs_waiting`` (read after the live partition in
one statement over the table): the wait stands in for a long read of the history.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from django.utils import timezone

from .project.demo import tasks
from .project.settings import APP_NAME, KIND, SCHEMA

CHANGELIST = "/admin/skiplock/job/"

postgres_only = pytest.mark.skipif(KIND != "postgres", reason="PostgreSQL's locks")

LIVE_LOCKS = r"""
SELECT a.pid, c.relname FROM pg_locks l
JOIN pg_class c ON c.oid = l.relation
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE a.application_name = %s AND n.nspname = %s AND l.granted
  AND c.relname LIKE 'skiplock\_jobs\_live%%'
"""

IN_TRANSACTION = """
SELECT pid, state, query FROM pg_stat_activity
WHERE application_name = %s AND state LIKE 'idle in transaction%%'
"""

WAITING_FOR = """
SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE a.application_name = %s AND NOT l.granted AND l.relation = %s::regclass
"""


def look(statement: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of ``statement`` read on a connection of the test's own (not Django's)."""
    import psycopg

    with psycopg.connect("host=127.0.0.1 port=5432 dbname=test user=postgres") as conn:
        return [tuple(r) for r in conn.execute(statement, args).fetchall()]


@pytest.fixture
def superuser() -> Client:
    user = User.objects.create_superuser(f"reads-{uuid.uuid4().hex[:8]}", "r@example.com", "x")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture(params=[False, True], ids=["autocommit", "ATOMIC_REQUESTS"])
def atomic(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """The project's ``ATOMIC_REQUESTS``: every view in a transaction of the request's own."""
    monkeypatch.setitem(connections.settings["default"], "ATOMIC_REQUESTS", request.param)
    return bool(request.param)


@pytest.fixture
def jobs(run_worker: Any) -> dict[str, Any]:
    """A dead job, a succeeded one and a pending one, of the default backend."""
    dead = tasks.explode.enqueue("for the admin's reads")
    done = tasks.add.enqueue(1, 2)
    run_worker()
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(2, 3)
    return {"dead": dead, "done": done, "pending": later}


def pages(jobs: dict[str, Any]) -> list[str]:
    dead = jobs["dead"].id
    return [
        CHANGELIST,
        f"{CHANGELIST}?state=dead",
        f"{CHANGELIST}?state__exact=pending",
        f"{CHANGELIST}?queue=default",
        f"{CHANGELIST}?q=explode",
        f"{CHANGELIST}{dead}/change/",
        f"{CHANGELIST}{dead}/history/",
    ]


def test_no_admin_page_leaves_a_transaction_open(
    superuser: Client, jobs: dict[str, Any], atomic: bool
) -> None:
    """After each response Django's connection is outside any transaction (SQLite: no read
    left open on the file; PostgreSQL: no session of this process idle in a transaction, none
    holding a lock on the live jobs), whether or not the project wraps views in one."""
    conn = connections["default"]
    for page in pages(jobs):
        response = superuser.get(page)
        assert response.status_code == 200, (page, response.status_code)
        assert not conn.in_atomic_block, page
        if KIND == "postgres":
            assert look(IN_TRANSACTION, APP_NAME) == [], page
            assert look(LIVE_LOCKS, APP_NAME, SCHEMA) == [], page
        else:
            assert conn.connection is None or not conn.connection.in_transaction, page


@postgres_only
@pytest.mark.parametrize(
    "page",
    [CHANGELIST, f"{CHANGELIST}?queue=default", f"{CHANGELIST}?state=dead"],
    ids=["the list", "a queue's", "a state's"],
)
def test_the_changelist_holds_no_live_segment_while_it_counts_the_rest(
    superuser: Client, jobs: dict[str, Any], atomic: bool, page: str
) -> None:
    """The list's count reads the history, dead and waiting jobs apart from the live ones, the
    rest first: while that read waits (here for the jobs in waiting), nothing of this process
    holds a live segment. Before, ``SELECT COUNT(*) FROM skiplock_jobs`` held every segment to
    its end (for as long as it read the history, on a real table)."""
    import psycopg

    table = f'"{SCHEMA}".skiplock_jobs_waiting'
    answer: dict[str, Any] = {}

    def get() -> None:
        try:
            answer["status"] = superuser.get(page).status_code
        finally:
            connections.close_all()  # this thread's connections

    reader = threading.Thread(target=get)
    with psycopg.connect("host=127.0.0.1 port=5432 dbname=test user=postgres") as holder:
        holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        reader.start()
        deadline = time.monotonic() + 30
        while not look(WAITING_FOR, APP_NAME, table)[0][0]:
            assert reader.is_alive(), f"the page ended ({answer}) before it read the rest"
            assert time.monotonic() < deadline, "the page never read the rest"
            time.sleep(0.01)
        assert look(LIVE_LOCKS, APP_NAME, SCHEMA) == []
        holder.rollback()
    reader.join(30)
    assert answer.get("status") == 200


@postgres_only
def test_no_admin_page_holds_the_live_jobs_across_its_statements(
    superuser: Client, jobs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``ATOMIC_REQUESTS`` the job pages still run each statement in a transaction of its
    own (they only read; an action acts through skiplock's sessions): before each statement a
    page runs, its session holds no lock on the live jobs left by an earlier one. Before, the
    request's transaction kept the locks of the list's first count (every segment) across its
    second count of the whole table and the rest of the view."""
    monkeypatch.setitem(connections.settings["default"], "ATOMIC_REQUESTS", True)
    conn = connections["default"]
    carried: list[tuple[str, list[tuple[Any, ...]]]] = []

    def before_each(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        raw = conn.connection  # the driver's own: no wrapper, no recursion
        held = raw.execute(
            r"""SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                WHERE l.pid = pg_backend_pid() AND c.relname LIKE 'skiplock\_jobs\_live%'"""
        ).fetchall()
        if held:
            carried.append((sql[:120], held))
        return execute(sql, params, many, context)

    with conn.execute_wrapper(before_each):
        for page in pages(jobs):
            assert superuser.get(page).status_code == 200, page
    assert carried == []


def test_the_changelist_counts_what_the_table_holds(
    superuser: Client, jobs: dict[str, Any], atomic: bool
) -> None:
    """The counts the list shows (of the filter, and in all) and its filters' values are the
    table's own, read in parts as they are."""
    from django.db import connection

    from skiplock.contrib.django.models import Job

    def direct(where: str = "") -> int:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM skiplock_jobs {where}")
            return int(cursor.fetchone()[0])

    total = direct()
    for query, where in (
        ("", ""),
        ("?state=dead", "WHERE state = 'dead'"),
        ("?queue=default", "WHERE queue = 'default'"),
        ("?state__exact=pending&queue=default", "WHERE state = 'pending' AND queue = 'default'"),
    ):
        changelist = superuser.get(CHANGELIST + query).context_data["cl"]
        assert changelist.result_count == direct(where), query
        assert changelist.full_result_count == total, query
    assert Job.objects.count() == total
    assert Job.objects.filter(task__contains="explode").count() == direct(
        "WHERE task LIKE '%%explode%%'"
    )
    page = superuser.get(CHANGELIST)
    specs = {spec.title: spec for spec in page.context_data["cl"].filter_specs}
    with connection.cursor() as cursor:
        for field in ("queue", "task"):
            cursor.execute(f"SELECT DISTINCT {field} FROM skiplock_jobs ORDER BY {field}")
            assert list(specs[field].lookup_choices) == [r[0] for r in cursor.fetchall()]
