"""An App over two PostgreSQL databases for the CLI's "one view" tests: its own
(SKIPLOCK_DATABASE_URL) and "b", number 1 (SKIPLOCK_TEST_OTHER_URL)."""

from __future__ import annotations

import os

import skiplock

app = skiplock.App(
    databases={"b": skiplock.Database(os.environ["SKIPLOCK_TEST_OTHER_URL"], number=1)}
)


@app.task(name="t")
async def t() -> None:
    pass
