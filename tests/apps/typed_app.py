"""An app whose tasks take and return pydantic models and dataclasses, for ``task list``."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

import skiplock

app = skiplock.App()  # SKIPLOCK_DATABASE_URL from the test


class Line(BaseModel):
    sku: str
    qty: int


class Order(BaseModel):
    id: int
    lines: list[Line]


@dataclass
class Address:
    city: str


class Receipt(BaseModel):
    total: int


@app.task(name="place")
async def place(order: Order, ship_to: Address | None = None, note: str = "") -> Receipt:
    """Typed: an order, an optional address; a receipt back."""
    return Receipt(total=sum(line.qty for line in order.lines))


@app.task(name="plain")
async def plain(n: int) -> int:
    """Untyped: no model in its signature."""
    return n
