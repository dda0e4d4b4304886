"""The adapter Django's ImmediateBackend tests run SkiplockBackend through."""

from __future__ import annotations

from typing import Any

from skiplock.contrib.django import SkiplockBackend


class DrainingSkiplockBackend(SkiplockBackend):
    """``SkiplockBackend`` whose ``enqueue`` then runs skiplock's own worker (a burst, as
    ``concurrent_worker --burst`` does) and returns the result as ``get_result`` reads it
    from the row: Django's ImmediateBackend tests, which expect the task to have run when
    enqueue returns, then check what SkiplockBackend stored and reports, not a stand-in."""

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        result = super().enqueue(task, args, kwargs)
        self.app.run_sync(self.app.drain())
        return self.get_result(result.id)


class RecordingSkiplockBackend(SkiplockBackend):
    """``SkiplockBackend`` that also keeps the results its ``enqueue`` returned, in
    ``results`` (``clear()`` forgets them), as Django's DummyBackend does: its tests and the
    framework's own (``test_tasks.py``), which read that list, then check SkiplockBackend's
    enqueue. No worker runs: the tasks stay READY, as under DummyBackend."""

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.results: list[Any] = []

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        result = super().enqueue(task, args, kwargs)
        self.results.append(result)
        return result

    def clear(self) -> None:
        self.results.clear()
