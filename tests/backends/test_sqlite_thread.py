"""The SQLite backend's database thread: calls in order, errors raised on the loop, a call
cancelled before the thread reaches it never runs, outcomes handed back many per wake-up."""

from __future__ import annotations

import asyncio
import threading

import pytest

from skiplock._backends.sqlite.connection import DatabaseThread


async def test_calls_run_in_order_on_one_thread_and_return_their_values() -> None:
    thread = DatabaseThread("test-db")
    seen: list[tuple[int, str]] = []

    def call(n: int) -> int:
        seen.append((n, threading.current_thread().name))
        return n * n

    try:
        results = await asyncio.gather(*(thread.call(lambda n=n: call(n)) for n in range(50)))
    finally:
        thread.shutdown()
    assert results == [n * n for n in range(50)]
    assert [n for n, _ in seen] == list(range(50))
    assert {name for _, name in seen} == {"test-db"}


async def test_an_error_is_raised_where_the_call_was_awaited() -> None:
    thread = DatabaseThread("test-db")

    def fail() -> None:
        raise ValueError("no such table")

    try:
        with pytest.raises(ValueError, match="no such table"):
            await thread.call(fail)
        assert await thread.call(lambda: "still serving") == "still serving"
    finally:
        thread.shutdown()


async def test_a_call_cancelled_before_the_thread_reaches_it_never_runs() -> None:
    thread = DatabaseThread("test-db")
    release = threading.Event()
    began = threading.Event()
    ran: list[str] = []

    def block() -> None:
        began.set()
        release.wait(10)

    try:
        busy = thread.call(block)
        await asyncio.to_thread(began.wait, 10)
        queued = thread.call(lambda: ran.append("queued"))
        queued.cancel()
        release.set()
        await busy
        assert await thread.call(lambda: "after") == "after"  # runs after the cancelled one
    finally:
        thread.shutdown()
    assert ran == []
