"""FastAPI and Starlette (docs/guides/fastapi.md): the guide's app, driven through httpx with
its lifespan and an in-process worker. A request enqueues inside its SQLAlchemy transaction,
so a request that fails enqueues nothing; another endpoint awaits the job's result.

    python examples/fastapi_requests.py                   # a temporary SQLite file
    python examples/fastapi_requests.py postgresql://localhost/scratch

Needs ``pip install "skiplock[fastapi,sqlalchemy]" httpx aiosqlite``. The same app served by
uvicorn with a worker in its own process is examples/fastapi_app.py.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from typing import Annotated

import httpx
import sqlalchemy as sa
from fastapi import Depends, FastAPI, HTTPException
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

import skiplock
from skiplock.contrib.starlette import skiplock_lifespan

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
URL = sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/web.db"
app = skiplock.App(URL)
engine = create_async_engine(  # the same database, through SQLAlchemy's async drivers
    URL.replace("sqlite:", "sqlite+aiosqlite:", 1).replace("postgresql:", "postgresql+asyncpg:", 1)
)
Session = async_sessionmaker(engine, expire_on_commit=False)
reports = sa.Table(
    "example_reports",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("title", sa.Text, nullable=False),
)


@app.task(name="build_report")
async def build_report(title: str) -> dict[str, object]:
    return {"title": title, "words": len(title.split())}


web = FastAPI(lifespan=skiplock_lifespan(app, worker=True))  # a worker in the web process


async def session() -> AsyncIterator[AsyncSession]:
    """One transaction per request: committed if the endpoint returns, rolled back if not."""
    async with Session() as s, s.begin():
        yield s


@web.post("/reports")
async def create(
    title: str, s: Annotated[AsyncSession, Depends(session)], fail: bool = False
) -> dict[str, int]:
    await s.execute(reports.insert().values(title=title))
    handle = await build_report.using(connection=s).aenqueue(title)  # commits with the row
    if fail:
        raise HTTPException(422, "rejected after the enqueue: the row and the job roll back")
    return {"job_id": handle.id}


@web.get("/reports/{job_id}")
async def result(job_id: int) -> object:
    try:
        return await (await app.job(job_id)).result(timeout=10)
    except TimeoutError:
        raise HTTPException(504, f"job {job_id} has not finished") from None
    except skiplock.JobNotFound:
        raise HTTPException(404, f"no job {job_id}") from None


async def main() -> None:
    await app.migrate()  # deploy steps: skiplock's tables and the app's own
    async with engine.begin() as conn:
        await conn.run_sync(reports.metadata.create_all)
    try:
        async with web.router.lifespan_context(web):  # what the server does at start and stop
            transport = httpx.ASGITransport(app=web)
            async with httpx.AsyncClient(transport=transport, base_url="http://web") as client:
                created = await client.post("/reports", params={"title": "quarterly sales"})
                job_id = created.json()["job_id"]
                print(f"POST /reports -> {created.status_code}, job {job_id}")
                answer = await client.get(f"/reports/{job_id}")
                print(f"GET /reports/{job_id} -> {answer.status_code} {answer.json()}")
                failed = await client.post("/reports", params={"title": "x", "fail": True})
                print(f"POST /reports?fail=1 -> {failed.status_code}")
        async with Session() as s:
            rows = await s.scalar(sa.select(sa.func.count()).select_from(reports))
        print(f"rows saved: {rows}; jobs: {sum((await app.counts()).values())}")
    finally:
        async with engine.begin() as conn:
            await conn.run_sync(reports.metadata.drop_all)
        await engine.dispose()
        await app.close()


if __name__ == "__main__":
    asyncio.run(main())
