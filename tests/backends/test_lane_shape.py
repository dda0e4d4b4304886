"""The Citus shape (issue 46): every hot statement names one lane by equality on every read of
a job table. With the lane as Citus's distribution column, such a statement is a single-shard
query, the only kind Citus lets take ``FOR UPDATE SKIP LOCKED`` (citus#4647); one that reads a
job table without it would fan out to every shard. Citus is not installable here, so the shape
is read from PostgreSQL's own plans: each statement of ``HOT`` is EXPLAINed (VERBOSE, with
real arguments) on a migrated schema holding several live generations, and every scan of a job
table (the job table's partitions: each generation and its wrapper, the long and keyed
segments, the history, dead and waiting partitions) must carry ``lane = $n`` (a generic plan)
or ``lane = '<the lane>'`` (a custom one) in its index condition or filter. The keyed claim's
statement is its function's body (``keyed_claim_walk``); the two functions it calls are
checked in their text."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

import pytest

from skiplock._backends.claim_rules import AGING_LEVELS, keys_to_visit
from skiplock._backends.params import ClaimParams
from skiplock._backends.postgres.rows import completion_params
from skiplock._backends.protocol import NEXT_RUN_PRIORITIES
from skiplock._job import Completion, Disposition

from .helpers import keyed_claim_walk, migrated_pg

LANE = "lane-x"
"""The lane every statement is asked about (not ``default``: nothing may assume it)."""

CLAIM = ClaimParams(None, 10, "w", "t", 60.0, 5.0, lane=LANE)


def claim7(queues: list[str] | None) -> list[Any]:
    """The seven leading arguments every claim takes (postgres/claim.py ``_claim_args``)."""
    return [queues, CLAIM.limit, CLAIM.worker, CLAIM.lease_token, 60.0, 5.0, None]


def outcome_args() -> list[Any]:
    done = [Completion(1, "t", Disposition.SUCCEED), Completion(2, "t", Disposition.RETRY)]
    return completion_params(done, None, "done")


HOT: dict[str, Callable[[], list[Any]]] = {
    "JOB_GET_AVAILABLE": lambda: [*claim7(None), False, LANE],
    "JOB_GET_AVAILABLE_IN_QUEUES": lambda: [*claim7(["a", "b"]), False, LANE],
    "JOB_GET_AVAILABLE_AGED": lambda: ["a", *claim7(None)[1:], 600.0, AGING_LEVELS, LANE],
    "JOB_GET_AVAILABLE_KEYED": lambda: [*claim7(None), False, None, None, keys_to_visit(10), LANE],
    "KEYED_CLAIM_WALK": lambda: [*claim7(["a"]), False, None, None, keys_to_visit(10), LANE],
    "JOB_READY_EXISTS": lambda: [None, None, LANE],
    "JOB_NEXT_RUN_AT": lambda: [None, NEXT_RUN_PRIORITIES, 0.0, LANE],
    "JOB_SET_STATE_IF_RUNNING_MANY": lambda: [*outcome_args(), LANE],
    "JOB_SET_STATE_AND_RELEASE": lambda: [*outcome_args(), "wake", 1000, LANE],
    "RELEASE_SUCCEEDED": lambda: [[1, 2], "wake", None, 1000, LANE],
    "JOB_HEARTBEAT_MANY": lambda: [[1], ["t"], 60.0, 5.0, None, [False], [None], None, LANE],
    "JOB_RECLAIM_EXPIRED": lambda: [None, 10, LANE],
    "JOB_RECLAIM_WORKER": lambda: [None, 10, "w", "exited", LANE],
}
"""Every statement a claim, an outcome, a release, a heartbeat or a reclaim runs, and its
arguments (``KEYED_CLAIM_WALK``: the statement inside ``skiplock_keyed_claim``)."""

NODE = re.compile(
    r"^\s*(?:->\s+)?(?P<node>[A-Z][A-Za-z ]+?)(?:\s+using\s+\S+)?\s+on\s+(?P<rel>\S+)"
)
"""A plan node that reads a relation, and the relation (schema-qualified under VERBOSE)."""
JOBS = re.compile(r"^(?:\S+\.)?skiplock_jobs\w*$")
"""A job table: the partitioned table or any partition of it."""
READS = ("Scan",)
INDEX_ONLY = ("Bitmap Index Scan",)
"""A node that reads an index alone: its heap scan above it (a Bitmap Heap Scan) is the read
of the table, and carries the table's conditions (Recheck Cond, Filter)."""
CONDITIONS = ("Index Cond:", "Filter:", "Recheck Cond:", "One-Time Filter:")


def lane_equality(alias: str) -> re.Pattern[str]:
    """``<alias>.lane = $n`` or ``<alias>.lane = '<LANE>'::text`` (custom plans bind it)."""
    return re.compile(rf"\b{re.escape(alias)}\.lane = (\$\d+|'{re.escape(LANE)}'::text)")


def scans_without_lane(plan: str) -> list[str]:
    """Each scan of a job table in ``plan`` whose own conditions do not name the lane by
    equality (the node's line, for the message); [] when every one does."""
    lines = plan.splitlines()
    missing = []
    for n, line in enumerate(lines):
        m = NODE.match(line)
        if not m or not m.group("node").endswith(READS) or m.group("node") in INDEX_ONLY:
            continue
        alias = line.rpartition(" ")[2]
        if not JOBS.match(m.group("rel")):
            continue
        alias = alias if alias != m.group("rel") else m.group("rel").rsplit(".", 1)[-1]
        conditions = []
        for below in lines[n + 1 :]:
            if "->" in below or NODE.match(below):
                break
            if below.strip().startswith(CONDITIONS):
                conditions.append(below)
        if not any(lane_equality(alias).search(c) for c in conditions):
            missing.append(line.strip())
    return missing


class Shape:
    def __init__(self, conn: Any, schema: str, statements: Any, workflows: Any) -> None:
        self.conn, self.schema = conn, schema
        self.statements, self.workflows = statements, workflows

    def text(self, name: str) -> str:
        if name == "KEYED_CLAIM_WALK":
            return keyed_claim_walk().replace("{s}", f'"{self.schema}"')
        if name == "RELEASE_SUCCEEDED":
            return str(self.workflows.RELEASE_SUCCEEDED)
        return str(getattr(self.statements, name))

    async def plan(self, statement: str, args: list[Any]) -> str:
        async with self.conn.transaction():
            # the settings the keyed claim's function runs under (harmless for the others)
            await self.conn.execute("SET LOCAL enable_seqscan = off")
            rows = await self.conn.fetch("EXPLAIN (VERBOSE, COSTS OFF) " + statement, *args)
        return "\n".join(r[0] for r in rows)


@pytest.fixture
async def shape(pg_url: str) -> AsyncIterator[Shape]:
    async with migrated_pg(pg_url) as (app, schema, conn):
        backend: Any = await app.backend()
        # a generation made past the migration's two: the plans read three, each apart
        assert await backend.rotate_live(0) is not None
        leaves = await conn.fetch(
            f"""SELECT relid::regclass::text AS name
                FROM pg_partition_tree('"{schema}".skiplock_jobs_live'::regclass)
                WHERE isleaf"""
        )
        assert len(leaves) >= 5, leaves  # three generations, the long and keyed segments
        yield Shape(conn, schema, backend._sql, backend._wf)


@pytest.mark.parametrize("name", sorted(HOT))
async def test_every_read_of_a_job_table_names_its_lane(shape: Shape, name: str) -> None:
    plan = await shape.plan(shape.text(name), HOT[name]())
    jobs_scans = [
        line for line in plan.splitlines() if NODE.match(line) and "skiplock_jobs" in line
    ]
    assert jobs_scans, plan  # it reads job tables at all
    missing = scans_without_lane(plan)
    assert missing == [], "\n".join(["MISSING:", *missing, "PLAN:", plan])


async def test_a_statement_that_loses_its_lane_filter_is_caught(shape: Shape) -> None:
    """The check can fail: the ordinary claim with its read's lane filter taken out (the
    update's is kept) has scans that name no lane."""
    statement = shape.text("JOB_GET_AVAILABLE")
    lost = statement.replace(
        "WHERE lane = $9 AND state = 'pending'", "WHERE $9::text IS NOT NULL AND state = 'pending'"
    )
    assert lost != statement
    assert scans_without_lane(await shape.plan(statement, HOT["JOB_GET_AVAILABLE"]())) == []
    missing = scans_without_lane(await shape.plan(lost, HOT["JOB_GET_AVAILABLE"]()))
    assert missing and all("pending_idx" in line or "Scan" in line for line in missing), missing


def test_the_keyed_claims_functions_name_the_lane_in_each_read() -> None:
    """skiplock_key_walk and skiplock_key_running run their reads inside (an EXPLAIN of the
    claim shows a call): each read of a job table in their text names the lane."""
    text = resources.files("skiplock._backends.postgres").joinpath("migrations", "0028.sql")
    body = text.read_text(encoding="utf-8")
    for function in ("skiplock_key_walk", "skiplock_key_running"):
        start = body.index(f"CREATE FUNCTION {{s}}.{function}(")
        end = body.index("\n$$;", start)
        text = body[start:end]
        reads = [m.start() for m in re.finditer(r"FROM \{s\}\.skiplock_jobs", text)]
        assert reads, function
        for at in reads:  # each read, to the end of its statement or its subquery's WHERE
            read = text[at : text.index(";", at)]
            assert re.search(r"\b(\w+\.)?lane = lane_\b", read), (function, read)
