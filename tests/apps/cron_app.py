"""An app with a per-second schedule, for the multi-process scheduler race."""

from __future__ import annotations

import skiplock

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


@app.periodic("* * * * * *", missed="latest")
@app.task(name="tick")
async def tick(timestamp: int) -> None:
    """Runs nowhere in the race test: the jobs it leaves pending are what gets counted."""
