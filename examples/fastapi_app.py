"""A FastAPI app that enqueues inside its SQLAlchemy transaction and awaits results.

    export SKIPLOCK_URL=sqlite:///app.db DATABASE_URL=sqlite+aiosqlite:///app.db
    skiplock migrate examples.fastapi_app:app
    python -c "import asyncio, examples.fastapi_app as m; asyncio.run(m.create_tables())"
    uvicorn examples.fastapi_app:web
    skiplock worker examples.fastapi_app:app          # the worker, in its own process

``POST /reports`` writes a row and enqueues its job in ONE transaction: the job exists if and
only if the row does (``?fail=1`` raises after the enqueue: both roll back). ``GET
/reports/{job_id}`` awaits the job's result: 504 on timeout, 500 naming the error of a dead job.
``SKIPLOCK_IN_PROCESS_WORKER=1`` runs the worker inside the web process instead.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Annotated

import sqlalchemy as sa
from fastapi import Depends, FastAPI, HTTPException
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

import skiplock
from skiplock.contrib.starlette import skiplock_lifespan

app = skiplock.App(os.environ.get("SKIPLOCK_URL", "sqlite:///fastapi-example.db"))
engine = create_async_engine(
    os.environ.get("DATABASE_URL", "sqlite+aiosqlite:///fastapi-example.db")
)
Session = async_sessionmaker(engine, expire_on_commit=False)
reports = sa.Table(
    "example_reports",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("title", sa.Text, nullable=False),
)


@app.task(name="example.build_report")
async def build_report(title: str, fail: bool = False) -> dict[str, object]:
    if fail:
        raise ValueError(f"cannot build {title!r}")
    return {"title": title, "words": len(title.split())}


web = FastAPI(
    lifespan=skiplock_lifespan(app, worker=os.environ.get("SKIPLOCK_IN_PROCESS_WORKER") == "1")
)


async def session() -> AsyncIterator[AsyncSession]:
    """One transaction per request: committed if the endpoint returns, rolled back if it raises."""
    async with Session() as s, s.begin():
        yield s


@web.post("/reports")
async def create_report(
    s: Annotated[AsyncSession, Depends(session)],
    title: str,
    fail: bool = False,
    broken: bool = False,
) -> dict[str, int]:
    await s.execute(reports.insert().values(title=title))
    handle = await build_report.using(connection=s).aenqueue(title, fail=broken)
    if fail:
        raise HTTPException(500, "failed after enqueueing: the row and the job roll back")
    return {"job_id": handle.id}


@web.get("/reports/{job_id}")
async def report_result(job_id: int, timeout: float = 10.0) -> object:
    try:
        return await (await app.job(job_id)).result(timeout=timeout)
    except TimeoutError:
        raise HTTPException(504, f"job {job_id} has not finished") from None
    except skiplock.JobFailed as exc:
        raise HTTPException(500, f"job {job_id} failed: {exc}") from None
    except skiplock.JobCancelled as exc:
        raise HTTPException(409, f"job {job_id} was cancelled: {exc}") from None
    except skiplock.JobNotFound:
        raise HTTPException(404, f"no job {job_id}") from None


async def create_tables() -> None:
    async with engine.begin() as conn:
        await conn.run_sync(reports.metadata.create_all)
