"""An App over two PostgreSQL databases with a schedule in each, for ``skiplock cron list``'s
"one view" test: its own (SKIPLOCK_DATABASE_URL) and "b", number 1 (SKIPLOCK_TEST_OTHER_URL),
queue "far" routed to b."""

from __future__ import annotations

import os

import skiplock

app = skiplock.App(
    databases={"b": skiplock.Database(os.environ["SKIPLOCK_TEST_OTHER_URL"], number=1)},
    lanes={"eu": "b"},
    routes={"far": "eu"},
)


@app.task(name="own")
async def own() -> None:
    pass


@app.task(name="far", queue="far")
async def far() -> None:
    pass


app.schedule(own, "0 3 * * *", name="own-nightly")
app.schedule(far, "0 4 * * *", name="far-nightly")
