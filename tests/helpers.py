"""Small test helpers shared by the suite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    """A pinned clock the backends read instead of the database's now()."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
