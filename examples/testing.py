"""Testing code that enqueues jobs (docs/guides/testing.md): the same test at two levels,
eager (no database, no worker) and on a throw-away database drained in this process.

    python examples/testing.py                            # a temporary SQLite file
    python examples/testing.py postgresql://localhost/scratch   # a schema of its own there

With pytest, ``pytest_plugins = ["skiplock.testing"]`` in conftest.py gives the third level,
the ``skiplock_app`` fixture: a fresh migrated App for each test.
"""

from __future__ import annotations

import asyncio
import sys

import skiplock
from skiplock.testing import eager, temporary_database

app = skiplock.App("sqlite:///never-opened.db")  # the tests below never open it


@app.task(name="make_thumbnail")
async def make_thumbnail(path: str, width: int) -> dict[str, int]:
    if width <= 0:
        raise ValueError("width must be positive")
    return {"width": width, "height": width * 3 // 4}


async def test_eager() -> None:
    with eager(app):  # each task runs at enqueue, through the strict JSON a worker uses
        handle = await make_thumbnail.aenqueue("cat.png", width=64)
        assert await handle.result() == {"width": 64, "height": 48}
        failing = await make_thumbnail.aenqueue("cat.png", width=0)
        try:
            await failing.result()
        except skiplock.JobFailed as failed:
            assert failed.error_type == "ValueError"
    print("eager: passed (no database was opened)")


async def test_on_a_database(url: str | None) -> None:
    async with temporary_database(app, url=url):  # new, migrated; dropped after the block
        handle = await make_thumbnail.aenqueue("cat.png", width=64)
        outcomes = await app.drain()
        assert [o.state for o in outcomes] == [skiplock.JobState.SUCCEEDED]
        assert await handle.result() == {"width": 64, "height": 48}
        print(f"temporary database ({app.url.split(':')[0]}): passed")


async def main() -> None:
    await test_eager()
    await test_on_a_database(sys.argv[1] if sys.argv[1:] else None)
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
