"""Transactional enqueue (docs/guides/transactional.md): the job is one more row in your
transaction, so it commits with your rows or rolls back with them.

    python examples/transactional.py                          # a temporary SQLite file
    python examples/transactional.py postgresql://localhost/scratch

On SQLite your connection is the standard library's ``sqlite3``; on PostgreSQL, asyncpg.
Either way the order table is a temporary one: nothing is left in your database.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile

import asyncpg

import skiplock

TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
URL = sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/shop.db"
app = skiplock.App(URL)


@app.task(name="send_receipt")
async def send_receipt(order_id: int) -> None: ...


class PaymentDeclined(Exception):
    pass


def with_sqlite3(path: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TEMP TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
    with conn:  # commits the block, or rolls it back
        order = conn.execute("INSERT INTO orders (total) VALUES (12.5)").lastrowid
        send_receipt.using(connection=conn).enqueue(order)
    try:
        with conn:
            order = conn.execute("INSERT INTO orders (total) VALUES (3)").lastrowid
            send_receipt.using(connection=conn).enqueue(order)
            raise PaymentDeclined(order)
    except PaymentDeclined:
        pass
    print("orders saved:", conn.execute("SELECT count(*) FROM orders").fetchone()[0])
    conn.close()


async def with_asyncpg(url: str) -> None:
    conn = await asyncpg.connect(url)
    await conn.execute("CREATE TEMP TABLE orders (id serial PRIMARY KEY, total numeric)")
    async with conn.transaction():
        order = await conn.fetchval("INSERT INTO orders (total) VALUES (12.5) RETURNING id")
        await send_receipt.using(connection=conn).aenqueue(order)
    try:
        async with conn.transaction():
            order = await conn.fetchval("INSERT INTO orders (total) VALUES (3) RETURNING id")
            await send_receipt.using(connection=conn).aenqueue(order)
            raise PaymentDeclined(order)
    except PaymentDeclined:
        pass
    print("orders saved:", await conn.fetchval("SELECT count(*) FROM orders"))
    await conn.close()


async def main() -> None:
    await app.migrate()
    if URL.startswith("sqlite"):
        path = URL.removeprefix("sqlite:///").split("?")[0]
        await asyncio.to_thread(with_sqlite3, path)  # sync code, off the event loop
    else:
        await with_asyncpg(URL)
    print("receipts to send:", (await app.counts("default")).get("pending", 0))
    print("one order committed with its job; the declined one rolled back with its job")
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
