"""An app whose tasks carry every key option, for ``skiplock task list``."""

from __future__ import annotations

import skiplock

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


@app.task(
    name="sync_account",
    concurrency_key=lambda account_id: f"account:{account_id}",
    key_limit=2,
    key_weight=3,
    unique_key=lambda account_id: f"sync:{account_id}",
    on_conflict="replace",
)
async def sync_account(account_id: int) -> None:
    """Capped and weighted per account; a pending sync takes the newest arguments."""


@app.task(name="bulk_import", concurrency_key="imports", fair=False)
async def bulk_import(batch: int) -> None:
    """One key, out of the turns."""


@app.task(name="ledger_entry", ordering_key=lambda account_id: f"ledger:{account_id}")
async def ledger_entry(account_id: int, cents: int) -> None:
    """One account's entries one at a time, in order."""


@app.task(name="reindex", debounce=2.0, ordering_key="index", ordering_on_dead="skip")
async def reindex(doc_id: int) -> None:
    """Debounced, and ordered on one key that skips a dead job."""


@app.task(
    name="welcome",
    unique_key="welcome",
    unique_while="live_or_succeeded",
    unique_scope="shared",
    version=2,
)
async def welcome(user_id: int) -> None:
    """Sent once; payload version 2."""
