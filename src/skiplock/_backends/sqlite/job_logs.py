"""SQLite's job logs (``skiplock._job_log``): a table of their own, written just before the
batch's outcomes, read by job, pruned once the job is gone."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..._job_log import JobLog, job_log_of
from .connection import Connected
from .connection import immediate as _immediate
from .statements import STATEMENTS as sql


class JobLogs(Connected):
    async def job_logs_write(self, logs: Sequence[JobLog]) -> None:
        if not logs:
            return
        now = self._now()
        rows = [
            {
                "job_id": log.job_id,
                "attempt": log.attempt,
                "lines": log.lines_json(),
                "cut_lines": log.cut_lines,
                "cut_bytes": log.cut_bytes,
                "now": now,
            }
            for log in logs
        ]

        def write(conn: sqlite3.Connection) -> None:
            with _immediate(conn):
                conn.executemany(sql.JOB_LOGS_WRITE, rows)

        await self._run("job_logs_write", write)

    async def job_logs_read(self, job_id: int) -> list[JobLog]:
        def read(conn: sqlite3.Connection) -> list[JobLog]:
            rows = conn.execute(sql.JOB_LOGS_READ, {"job_id": job_id}).fetchall()
            return [job_log_of(*r) for r in rows]

        return await self._run("job_logs_read", read)

    async def job_logs_prune(self, batch: int) -> int:
        def prune(conn: sqlite3.Connection) -> int:
            with _immediate(conn):
                return int(conn.execute(sql.JOB_LOGS_PRUNE, {"batch": batch}).rowcount)

        return await self._run("job_logs_prune", prune)
