"""Typed arguments and results (issue 47), on both databases: parameters and returns annotated
with pydantic models or dataclasses are validated at enqueue (nothing written when they do
not fit), stored as JSON, rebuilt at run after the upcasters; a stored payload that no longer
fits sends its job to dead, the worker going on; ``task list --json`` shows JSON Schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import skiplock
from skiplock import JobState, _typed

from .apps import typed_app
from .helpers import ROOT, parsed


class Line(BaseModel):
    sku: str
    qty: int


class Order(BaseModel):
    id: int
    lines: list[Line]
    note: str | None = None


class Receipt(BaseModel):
    order_id: int
    total: int


@dataclass
class Street:
    name: str
    number: int


@dataclass
class Address:
    city: str
    street: Street
    tags: list[str] = field(default_factory=list)


class AddressV1(BaseModel):
    city: str


class AddressV2(BaseModel):
    city: str
    country: str


class Qty(BaseModel):
    qty: int


ORDER = Order(id=7, lines=[Line(sku="a", qty=2), Line(sku="b", qty=3)])


async def test_nested_models_round_trip(app: skiplock.App) -> None:
    seen: list[Any] = []

    @app.task(name="place")
    async def place(order: Order, more: list[Order] | None = None, *, note: str = "") -> None:
        seen.append((order, more, note))

    handle = await place.aenqueue(ORDER, more=[ORDER, {"id": 8, "lines": []}], note="x")
    stored = await handle.fetch()
    assert stored.args == [ORDER.model_dump(mode="json")]  # JSON on the row
    await app.drain()
    assert (await handle.fetch()).state is JobState.SUCCEEDED
    ((order, more, note),) = seen
    assert isinstance(order, Order) and order == ORDER
    assert more == [ORDER, Order(id=8, lines=[])] and isinstance(more[1], Order)
    assert note == "x"


async def test_a_dataclass_argument(app: skiplock.App) -> None:
    seen: list[Any] = []

    @app.task(name="deliver")
    def deliver(to: Address) -> None:
        seen.append(to)

    where = Address("Oslo", Street("Storgata", 3), ["door"])
    handle = await deliver.aenqueue(where)
    assert (await handle.fetch()).args == [
        {"city": "Oslo", "street": {"name": "Storgata", "number": 3}, "tags": ["door"]}
    ]
    await app.drain()
    assert seen == [where] and isinstance(seen[0].street, Street)


async def test_plain_dataclasses_without_pydantic(
    app: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_typed, "_pydantic_installed", lambda: False)
    seen: list[Any] = []

    @app.task(name="deliver")
    def deliver(to: Address, also: Address | None = None) -> Address:
        seen.append((to, also))
        return to

    assert isinstance(deliver.typed.positional[0][1], _typed._Plain)  # type: ignore[union-attr]
    where = Address("Oslo", Street("Storgata", 3))
    handle = await deliver.aenqueue(where, {"city": "Bergen", "street": {"name": "A", "number": 1}})
    with pytest.raises(skiplock.ArgumentInvalid, match=r"argument 'to': .*field street"):
        await deliver.aenqueue({"city": "Oslo", "street": {"name": "A"}})
    await app.drain()
    assert seen == [(where, Address("Bergen", Street("A", 1)))]
    assert await handle.result(timeout=30) == where
    with pytest.raises(skiplock.ConfigurationError, match="install skiplock\\[typed\\]"):

        @app.task(name="many")
        def many(to: list[Address]) -> None:
            pass


async def test_an_invalid_argument_is_refused_at_enqueue_and_nothing_is_written(
    app: skiplock.App,
) -> None:
    @app.task(name="place")
    async def place(order: Order, note: str = "") -> None:
        pass

    bad = {"id": 7, "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": "lots"}]}
    with pytest.raises(skiplock.ArgumentInvalid) as caught:
        await place.aenqueue(bad)
    message = str(caught.value)
    assert "task 'place'" in message and "argument 'order'" in message
    assert "field lines.1.qty" in message and "nothing was enqueued" in message
    assert "\n" not in message
    assert isinstance(caught.value, skiplock.PayloadError | ValueError)
    with pytest.raises(skiplock.ArgumentInvalid, match="argument 'order'"):
        place.enqueue(order=42)  # the sync path too, by keyword
    with pytest.raises(skiplock.ArgumentInvalid, match="argument 'order'"):
        await app.enqueue_many([place.prepare(ORDER), place.prepare("not an order")])
    assert await app.count_jobs() == 0


async def test_a_changed_model_with_an_upcaster(app: skiplock.App, db_url: str) -> None:
    before = skiplock.App(db_url)

    @before.task(name="ship")
    async def ship_v1(to: AddressV1) -> None:
        pass

    try:
        old = (await ship_v1.aenqueue(AddressV1(city="Oslo"))).id
    finally:
        await before.close()

    def v1_to_v2(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        (address,) = args
        return [{**address, "country": "NO"}], kwargs

    seen: list[Any] = []

    @app.task(name="ship", version=2, upcast={1: v1_to_v2})
    async def ship(to: AddressV2) -> None:
        seen.append(to)

    new = await ship.aenqueue(AddressV2(city="Lyon", country="FR"))
    await app.drain()
    assert seen == [AddressV2(city="Oslo", country="NO"), AddressV2(city="Lyon", country="FR")]
    assert [(await app.get_job(i)).state for i in (old, new.id)] == [JobState.SUCCEEDED] * 2


async def test_a_stored_payload_that_no_longer_validates_goes_to_dead(
    app: skiplock.App, db_url: str
) -> None:
    before = skiplock.App(db_url)

    @before.task(name="count")
    async def count_v1(item: dict[str, Any]) -> None:  # the deploy before: any object
        pass

    try:
        stale = (await count_v1.aenqueue({"qty": "lots"})).id
    finally:
        await before.close()
    ran: list[Qty] = []

    @app.task(name="count", max_attempts=5)
    async def count(item: Qty) -> None:
        ran.append(item)

    fine = await count.aenqueue(Qty(qty=2))
    await app.drain()  # the worker meets the stale row first, and goes on
    row = await app.get_job(stale)
    assert row.state is JobState.DEAD and row.attempt == 1  # at once: a retry cannot help
    message = row.errors[-1]["message"]
    assert "stored argument 'item'" in message and "field qty" in message, message
    assert (await fine.fetch()).state is JobState.SUCCEEDED and ran == [Qty(qty=2)]
    with pytest.raises(skiplock.JobFailed, match="field qty"):
        await (await app.job(stale)).result(timeout=30)


async def test_a_typed_result_is_rebuilt_by_the_handle(app: skiplock.App) -> None:
    @app.task(name="total")
    async def total(order: Order) -> Receipt:
        return Receipt(order_id=order.id, total=sum(line.qty for line in order.lines))

    @app.task(name="totals")
    def totals(orders: list[Order]) -> list[Receipt]:
        return [Receipt(order_id=o.id, total=len(o.lines)) for o in orders]

    handle = await total.aenqueue(ORDER)
    many = await totals.aenqueue([ORDER])
    await app.drain()
    receipt = await handle.result(timeout=30)
    assert isinstance(receipt, Receipt) and receipt == Receipt(order_id=7, total=5)
    assert await (await app.job(handle.id)).result(timeout=30) == receipt  # a rebuilt handle
    assert await app.gather([handle, many]) == [receipt, [Receipt(order_id=7, total=2)]]
    assert (await handle.fetch()).result == {"order_id": 7, "total": 5}  # the row: JSON


async def test_a_result_that_does_not_fit_its_annotation_goes_to_dead(app: skiplock.App) -> None:
    @app.task(name="total")
    async def total(order: Order) -> Receipt:
        return {"order_id": order.id}  # type: ignore[return-value]  # total missing

    handle = await total.aenqueue(ORDER)
    await app.drain()
    row = await handle.fetch()
    assert row.state is JobState.DEAD and "field total" in row.errors[-1]["message"]


async def test_eager_mode_rebuilds_too(tmp_path: Path) -> None:
    app = skiplock.App(f"sqlite:///{tmp_path / 'eager.db'}", eager=True)

    @app.task(name="total")
    async def total(order: Order) -> Receipt:
        assert isinstance(order, Order)
        return Receipt(order_id=order.id, total=1)

    handle = await total.aenqueue(ORDER.model_dump())
    assert await handle.result() == Receipt(order_id=7, total=1)
    with pytest.raises(skiplock.ArgumentInvalid):
        await total.aenqueue({"id": "x"})
    await app.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "SKIPLOCK_DATABASE_URL": "sqlite:///unused"}
    return subprocess.run(
        [sys.executable, "-m", "skiplock", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_task_list_shows_the_arguments_as_json_schema() -> None:
    spec = "tests.apps.typed_app:app"
    tasks = {t["name"]: t for t in parsed(_cli("task", "list", spec, "--json"))["tasks"]}
    place, plain = tasks["place"], tasks["plain"]
    assert list(place["arguments"]) == ["order", "ship_to", "note"]
    order = place["arguments"]["order"]
    assert order == typed_app.Order.model_json_schema()
    assert order["$defs"]["Line"]["properties"]["qty"]["type"] == "integer"
    assert {"$ref": "#/$defs/Address"} in place["arguments"]["ship_to"]["anyOf"]
    assert place["arguments"]["note"] == {}  # untyped: any JSON value
    assert place["returns"]["title"] == "Receipt"
    assert (plain["arguments"], plain["returns"]) == ({"n": {}}, None)
    text = _cli("task", "list", spec).stdout
    lines = {line.split()[0]: line for line in text.splitlines()}
    assert lines["place"].endswith(" typed=order,ship_to,return")
    assert "typed=" not in lines["plain"]


def test_skiplock_imports_without_pydantic() -> None:
    script = (
        "import sys; sys.modules['pydantic'] = None\n"  # an import of it fails
        "import dataclasses, skiplock\n"
        "@dataclasses.dataclass\n"
        "class A:\n"
        "    x: int\n"
        "app = skiplock.App('sqlite:///unused.db')\n"
        "@app.task\n"
        "def f(a: A, n: int) -> A:\n"
        "    return a\n"
        "print(type(f.typed.positional[0][1]).__name__, f.prepare(A(1), 2).args_json)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["_Plain", json.dumps([{"x": 1}, 2], separators=(",", ":"))]


async def test_a_chain_step_receives_the_previous_typed_result_rebuilt(app: skiplock.App) -> None:
    @app.task(name="total")
    async def total(order: Order) -> Receipt:
        return Receipt(order_id=order.id, total=sum(line.qty for line in order.lines))

    @app.task(name="describe")
    async def describe(receipt: Receipt, prefix: str) -> str:
        assert isinstance(receipt, Receipt), receipt
        return f"{prefix} {receipt.order_id}: {receipt.total}"

    with pytest.raises(skiplock.ArgumentInvalid, match="argument 'order'"):
        await skiplock.chain(total.s({"id": "x"}), describe.s("order")).aenqueue()
    flow = await skiplock.chain(total.s(ORDER), describe.s("order")).aenqueue()
    both = await skiplock.group(total.s(ORDER), total.s(ORDER)).aenqueue()
    await app.drain()
    assert await flow.result(timeout=30) == "order 7: 5"
    assert await both.result(timeout=30) == [Receipt(order_id=7, total=5)] * 2


class ReceiptV2(BaseModel):
    order_id: int
    total: int
    currency: str


async def test_a_stored_result_that_no_longer_fits_is_read_as_its_json(
    app: skiplock.App, db_url: str
) -> None:
    before = skiplock.App(db_url)

    @before.task(name="total")
    async def total_v1(order: Order) -> Receipt:
        return Receipt(order_id=order.id, total=1)

    try:
        job = (await total_v1.aenqueue(ORDER)).id
        await before.drain()
    finally:
        await before.close()

    @app.task(name="total")
    async def total(order: Order) -> ReceiptV2:
        return ReceiptV2(order_id=order.id, total=1, currency="EUR")

    assert await (await app.job(job)).result(timeout=30) == {"order_id": 7, "total": 1}


def test_a_task_without_models_takes_the_plain_path(tmp_path: Path) -> None:
    app = skiplock.App(f"sqlite:///{tmp_path / 'plain.db'}")

    @app.task(name="plain")
    def plain(n: int, items: list[dict[str, Any]], *rest: str, **more: float) -> str:
        return ""

    @app.task(name="bare")
    def bare(n, m=1):  # type: ignore[no-untyped-def]  # no annotations at all
        return n

    @app.task(name="typed")
    def typed(order: Order) -> None:
        pass

    assert plain.typed is None and bare.typed is None and typed.typed is not None
    assert plain.prepare(1, [{"a": 1}]).args_json == '[1,[{"a":1}]]'


@dataclass
class Node:
    name: str
    child: Node | None = None


def test_a_dataclass_that_holds_itself_without_pydantic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_typed, "_pydantic_installed", lambda: False)
    app = skiplock.App(f"sqlite:///{tmp_path / 'tree.db'}")

    @app.task(name="walk")
    def walk(tree: Node) -> None:
        pass

    assert walk.typed is not None
    codec = walk.typed.positional[0][1]
    assert isinstance(codec, _typed._Plain)
    inner = codec.nested["child"]
    assert inner.nested["child"] is inner  # one converter per class, not a chain of them
    tree = Node("a", Node("b", Node("c")))
    stored = json.loads(walk.prepare(tree).args_json)
    assert walk.typed.load_call("walk", stored, {}) == ([tree], {})
    schema = walk.typed.schemas()["arguments"]["tree"]
    assert schema["properties"]["child"]["anyOf"][0] == {"title": "Node", "type": "object"}


def test_an_annotation_that_cannot_be_resolved_leaves_its_parameter_untyped(
    tmp_path: Path,
) -> None:
    app = skiplock.App(f"sqlite:///{tmp_path / 'hints.db'}")

    @app.task(name="mixed")
    def mixed(order: Order, other: OnlyWhenTypeChecking) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    assert mixed.typed is not None
    assert [(name, codec is not None) for name, codec in mixed.typed.positional] == [
        ("order", True),
        ("other", False),
    ]
    assert json.loads(mixed.prepare(ORDER, {"any": "json"}).args_json)[1] == {"any": "json"}
