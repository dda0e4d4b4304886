"""PostgreSQL's job logs (``skiplock._job_log``): a plain table of their own, written in one
statement a batch just before the batch's outcomes, read by job, pruned once the job is gone."""

from __future__ import annotations

from collections.abc import Sequence

from ..._job_log import JobLog, job_log_of
from .connection import Connection
from .errors import wrapped as _wrapped


class JobLogs(Connection):
    async def job_logs_write(self, logs: Sequence[JobLog]) -> None:
        last = {(log.job_id, log.attempt): log for log in logs}  # one row an attempt
        if not last:
            return
        kept = list(last.values())
        with _wrapped("job_logs_write"):
            await self.pool.execute(
                self._sql.JOB_LOGS_WRITE,
                [log.job_id for log in kept],
                [log.attempt for log in kept],
                [log.lines_json() for log in kept],
                [log.cut_lines for log in kept],
                [log.cut_bytes for log in kept],
            )

    async def job_logs_read(self, job_id: int) -> list[JobLog]:
        with _wrapped("job_logs_read"):
            rows = await self.pool.fetch(self._sql.JOB_LOGS_READ, job_id)
        return [job_log_of(*r) for r in rows]

    async def job_logs_prune(self, batch: int) -> int:
        with _wrapped("job_logs_prune"):
            status = await self.pool.execute(self._sql.JOB_LOGS_PRUNE, batch)
        return int(status.split()[-1])
