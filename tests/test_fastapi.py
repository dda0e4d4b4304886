"""The FastAPI example, driven over HTTP (httpx's ASGI transport) on both databases.

A real ``skiplock worker`` subprocess runs the jobs: enqueue in the request's SQLAlchemy
transaction → the result comes back over HTTP; a rolled-back request enqueues nothing; a dead
job's error comes back as a 500; a timeout as a 504. The in-process worker mode runs a job and
stops with the app's lifespan.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType, SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

import skiplock
from skiplock.contrib.starlette import _in_process_worker, skiplock_lifespan

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def sqlalchemy_url(app_url: str) -> str:
    """The same database for SQLAlchemy; on PostgreSQL the test's schema via search_path."""
    if app_url.startswith("sqlite"):
        return app_url.replace("sqlite:", "sqlite+aiosqlite:", 1)
    base, _, query = app_url.partition("?")
    schema = parse_qs(query)["schema"][0]
    assert urlsplit(base).scheme.startswith("postgres")
    return (
        f"{base.replace('postgresql:', 'postgresql+psycopg:', 1)}?options=-csearch_path%3D{schema}"
    )


@pytest.fixture
def env(db_url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {"SKIPLOCK_URL": db_url, "DATABASE_URL": sqlalchemy_url(db_url)}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SKIPLOCK_IN_PROCESS_WORKER", raising=False)
    return values


def load_example() -> ModuleType:
    """A fresh import of the example, reading the environment the test set."""
    spec = importlib.util.spec_from_file_location(
        f"fastapi_app_{uuid.uuid4().hex}", EXAMPLES / "fastapi_app.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def serving(example: ModuleType) -> AsyncIterator[httpx.AsyncClient]:
    """The example's tables, its lifespan entered, and an HTTP client on it."""
    await example.app.migrate()
    await example.create_tables()
    try:
        async with example.web.router.lifespan_context(example.web):
            transport = httpx.ASGITransport(app=example.web)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                yield client
    finally:
        await example.engine.dispose()


@pytest.fixture
def worker_process(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    cli = [sys.executable, "-m", "skiplock"]
    subprocess.run(
        [*cli, "migrate", "fastapi_app:app"], cwd=EXAMPLES, env={**os.environ, **env}, check=True
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "skiplock", "worker", "fastapi_app:app"],
        cwd=EXAMPLES,
        env={**os.environ, **env},
    )
    yield proc
    proc.terminate()
    assert proc.wait(timeout=30) == 0


@pytest.mark.slow
async def test_enqueue_then_result_through_a_worker_process(
    env: dict[str, str], worker_process: subprocess.Popen[bytes]
) -> None:
    example = load_example()
    async with serving(example) as client:
        created = await client.post("/reports", params={"title": "three word title"})
        assert created.status_code == 200, created.text
        job_id = created.json()["job_id"]
        done = await client.get(f"/reports/{job_id}", params={"timeout": 60})
        assert done.status_code == 200, done.text
        assert done.json() == {"title": "three word title", "words": 3}

        broken = (await client.post("/reports", params={"title": "x", "broken": True})).json()
        dead = await client.get(f"/reports/{broken['job_id']}", params={"timeout": 60})
        assert dead.status_code == 500
        assert "cannot build 'x'" in dead.json()["detail"]


async def test_a_rolled_back_request_enqueues_nothing(env: dict[str, str]) -> None:
    example = load_example()
    async with serving(example) as client:
        failed = await client.post("/reports", params={"title": "gone", "fail": True})
        assert failed.status_code == 500
        assert sum((await example.app.counts()).values()) == 0
        async with example.Session() as s:
            assert (await s.execute(example.reports.select())).all() == []
        kept = (await client.post("/reports", params={"title": "kept"})).json()
        late = await client.get(f"/reports/{kept['job_id']}", params={"timeout": 0.2})
        assert late.status_code == 504  # no worker here: the job waits, the request times out


async def test_in_process_worker_runs_jobs_and_stops_with_the_app(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKIPLOCK_IN_PROCESS_WORKER", "1")
    example = load_example()
    async with serving(example) as client:
        worker = example.web.state.skiplock_worker
        assert worker.ready.is_set()
        job_id = (await client.post("/reports", params={"title": "in process"})).json()["job_id"]
        done = await client.get(f"/reports/{job_id}", params={"timeout": 60})
        assert done.json() == {"title": "in process", "words": 2}
    assert not worker.ready.is_set()
    assert worker.processed == 1


def test_lifespan_checks_its_options() -> None:
    app = skiplock.App("sqlite:///unused.db")
    with pytest.raises(skiplock.ConfigurationError, match="worker"):
        skiplock_lifespan(app, worker="yes")  # type: ignore[arg-type]
    with pytest.raises(skiplock.ConfigurationError, match="app"):
        skiplock_lifespan("sqlite:///x.db")  # type: ignore[arg-type]


@pytest.mark.parametrize("worker", [False, True])
async def test_an_unmigrated_database_fails_the_startup(db_url: str, worker: bool) -> None:
    """Not the first request, nor an in-process worker that quietly never runs a job."""
    app = skiplock.App(db_url)
    lifespan = skiplock_lifespan(app, worker=worker)
    with pytest.raises(skiplock.SchemaError, match="skiplock migrate"):
        async with lifespan(object()):
            pass


async def test_the_in_process_worker_drains_its_job_before_the_app_exits(db_url: str) -> None:
    """Shutdown stops claiming and lets the running job finish (within shutdown_timeout_s)."""
    app = skiplock.App(db_url)
    started, release = asyncio.Event(), asyncio.Event()

    @app.task(name="slow")
    async def slow() -> str:
        started.set()
        await release.wait()
        return "finished"

    await app.migrate()
    lifespan = skiplock_lifespan(app, worker=skiplock.WorkerConfig(shutdown_timeout_s=60))
    web = SimpleNamespace(state=SimpleNamespace())
    serving_app = lifespan(web)
    await serving_app.__aenter__()
    handle = await slow.aenqueue()
    await asyncio.wait_for(started.wait(), 30)
    exiting = asyncio.create_task(serving_app.__aexit__(None, None, None))
    await asyncio.sleep(0)  # one turn: the exit has asked the worker to stop, and now waits
    assert not exiting.done()
    release.set()
    await asyncio.wait_for(exiting, 60)
    assert web.state.skiplock_worker.processed == 1
    record = await app.get_job(handle.id)
    await app.close()
    assert record.state is skiplock.JobState.SUCCEEDED


async def test_a_worker_that_dies_is_logged_and_raised(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker itself (past the lifespan's own schema check) dying before it is ready."""
    app = skiplock.App(db_url)
    with pytest.raises(skiplock.SchemaError, match="skiplock migrate"):
        async with _in_process_worker(app, skiplock.WorkerConfig()):
            pass
    await app.close()
    assert "in-process skiplock worker died" in caplog.text
