"""Cron expressions: strict validation with messages that point at the field, and next-fire
times in an IANA time zone under one written daylight-saving rule.

Syntax: five fields ``minute hour day-of-month month day-of-week``, plus an optional sixth
field **at the end** for seconds (croniter's convention: ``*/10 * * * * 30`` fires at second
30). Ranges, steps, lists, month and day names, and the nicknames ``@yearly`` (``@annually``),
``@monthly``, ``@weekly``, ``@daily`` (``@midnight``) and ``@hourly`` are accepted. As in
Vixie cron, when both day-of-month and day-of-week are restricted, either one matching fires.

The DST rule. Expressions are evaluated on the zone's wall clock (``zoneinfo``), then:

- **Wall-clock schedules** (the hour field is a fixed value, list or range, e.g. ``30 2 * * *``):
  a slot that falls in a spring-forward gap fires once, at the first instant after the gap;
  a slot that falls in a fall-back overlap fires once, at its first occurrence.
- **Absolute-time schedules** (the hour field is ``*`` or a step, e.g. ``*/15 * * * *`` or
  ``0 */2 * * *``): they follow elapsed time through a transition. Wall times inside a gap
  never happen and are not fired; wall times in an overlap happen twice and fire twice, once
  per real occurrence. No instant ever fires twice, and no elapsed period is left out.

Evaluation uses croniter (a maintained library) on naive wall-clock times; this module only
maps each wall-clock candidate to real instants under the rule above, which croniter's own
time-zone handling does not implement. It is imported when an expression is first read, so
a process whose app has no cron schedule (a CLI command, most workers) never loads it.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import ConfigurationError

NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    names_start: int = 0

    def value(self, text: str, part: str) -> int:
        lowered = text.lower()
        if lowered in self.names:
            return self.names.index(lowered) + self.names_start
        if not (text.isascii() and text.isdigit()):
            raise ConfigurationError(
                f"{self.name} field '{part}' is not a number, name, range, step or list"
            )
        number = int(text)
        if not self.low <= number <= self.high:
            raise ConfigurationError(
                f"{self.name} field '{text}' out of range {self.low}-{self.high}"
            )
        return number

    def check(self, text: str) -> None:
        for part in text.split(","):
            self._check_part(part)

    def _check_part(self, part: str) -> None:
        base, _, step = part.partition("/")
        if "/" in part and not (step.isascii() and step.isdigit() and int(step) >= 1):
            raise ConfigurationError(
                f"{self.name} field '{part}': step must be a whole number >= 1"
            )
        if base == "*":
            return
        start, dash, end = base.partition("-")
        first = self.value(start, part)
        if dash and first > self.value(end, part):
            raise ConfigurationError(f"{self.name} field '{part}': range runs backwards")


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, tuple(MONTHS), 1),
    _Field("day-of-week", 0, 7, tuple(DAYS), 0),
    _Field("second", 0, 59),
)
_REFERENCE = datetime(2000, 1, 1)
_STEP_OR_ANY = re.compile(r"^\*(/\d+)?$|/")


def zone(name: str) -> ZoneInfo:
    """An IANA zone, or a ConfigurationError naming it."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigurationError(f"tz={name!r}: not an IANA time zone name") from exc


@dataclass(frozen=True)
class CronExpression:
    """A validated cron expression; ``next_fires`` applies the module's DST rule."""

    text: str
    normalized: str = field(init=False, repr=False)
    absolute: bool = field(init=False, repr=False)
    """True when the hour field is ``*`` or a step: the schedule follows elapsed time."""

    def __post_init__(self) -> None:
        normalized = NICKNAMES.get(self.text.strip().lower(), self.text.strip())
        fields = normalized.split()
        if len(fields) not in (5, 6):
            raise ConfigurationError(
                f"cron {self.text!r}: expected 5 fields (minute hour day-of-month month "
                f"day-of-week) and an optional 6th for seconds, got {len(fields)}"
            )
        for spec, text in zip(_FIELDS, fields, strict=False):
            spec.check(text)
        object.__setattr__(self, "normalized", " ".join(fields))
        object.__setattr__(self, "absolute", bool(_STEP_OR_ANY.search(fields[1])))
        from croniter import CroniterBadDateError, CroniterError, croniter  # an app with cron

        try:
            croniter(self.normalized, _REFERENCE).get_next(datetime)
        except CroniterBadDateError as exc:
            raise ConfigurationError(f"cron {self.text!r}: this schedule never fires") from exc
        except CroniterError as exc:
            raise ConfigurationError(f"cron {self.text!r}: {exc}") from exc

    @property
    def has_seconds(self) -> bool:
        """Whether the expression has the optional 6th (seconds) field: its fires are then
        shown to the second."""
        return len(self.normalized.split()) == 6

    def matches(self, wall: datetime) -> bool:
        """Whether a naive wall-clock time matches the expression."""
        from croniter import croniter

        return bool(croniter.match(self.normalized, wall))

    def _walls(self, start: datetime) -> Iterator[datetime]:
        from croniter import CroniterBadDateError, croniter

        it = croniter(self.normalized, start)
        while True:
            try:
                yield it.get_next(datetime)
            except CroniterBadDateError:
                return

    def next_fires(self, after: datetime, tz: ZoneInfo) -> Iterator[datetime]:
        """Fire instants strictly after ``after`` (aware), in UTC, strictly increasing."""
        after_utc = after.astimezone(UTC)
        start = after_utc.astimezone(tz).replace(tzinfo=None) - timedelta(seconds=1)
        if _transition_near(after_utc, tz):
            # The wall clock may repeat up to a few hours after `after`: start before them.
            start -= _LOOKBACK
        pending: list[datetime] = []
        last: datetime | None = None
        for wall in self._walls(start):
            for instant in self._instants(wall, tz):
                heapq.heappush(pending, instant)
            # Later wall times never map before this one's earlier mapping: a safe watermark.
            watermark = min(
                wall.replace(tzinfo=tz, fold=0).astimezone(UTC),
                wall.replace(tzinfo=tz, fold=1).astimezone(UTC),
            )
            while pending and pending[0] <= watermark:
                instant = heapq.heappop(pending)
                if instant > after_utc and instant != last:
                    last = instant
                    yield instant

    def _instants(self, wall: datetime, tz: ZoneInfo) -> list[datetime]:
        """The real instants a wall-clock match fires at, under the module's DST rule."""
        early = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
        late = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
        if early == late:
            return [early]
        if early < late:  # an overlap: the wall time happens twice
            return [early, late] if self.absolute else [early]
        return [] if self.absolute else [_transition(late, early, tz)]  # a gap


_LOOKBACK = timedelta(hours=3)


def _transition_near(instant: datetime, tz: ZoneInfo) -> bool:
    """Whether ``tz`` changes its UTC offset within ``_LOOKBACK`` of ``instant``."""
    offsets = {(instant + k * _LOOKBACK).astimezone(tz).utcoffset() for k in (-1, 0, 1)}
    return len(offsets) > 1


def _transition(low: datetime, high: datetime, tz: ZoneInfo) -> datetime:
    """The instant in (low, high] where ``tz``'s UTC offset changes (found by bisection)."""
    before = low.astimezone(tz).utcoffset()
    lo, hi = low, high
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(tz).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return hi.replace(microsecond=0)
