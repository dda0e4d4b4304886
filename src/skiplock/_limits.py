"""The bounds of every value a user passes: one table, checked at the edge.

Every number that reaches a timestamp or an interval (timeouts, leases, retries, snoozes,
``run_after``, rate limits) and every integer that reaches an ``integer`` column (priority,
max_attempts, queue limits) is checked here before a backend sees it, so both backends accept
exactly the same values, and a bad one is a ``ConfigurationError`` naming the option instead
of a raw driver error, an ``OverflowError`` in a worker, or a row that stalls a queue.
README.md's "Bounds" table lists these limits; change both together.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from .errors import ConfigurationError

MAX_SECONDS = 10 * 365 * 86400.0
"""The longest duration anything accepts: 10 years. Far past any sensible delay, and far
inside what both backends can add to ``now()`` (PostgreSQL intervals, Python datetimes)."""

MAX_INT = 2**31 - 1
"""PostgreSQL ``integer``, the column type of priority, attempts and queue limits."""

MAX_ATTEMPTS = 1_000_000
"""A job may be tried at most this often (attempts are counted in an ``integer`` column)."""

MAX_CONCURRENCY = 10_000
"""Jobs one worker process runs (or claims ahead) at once: each is an asyncio task, a lease
the keeper renews in one statement, and maybe a pool thread."""

MAX_KEY_LIMIT = 1_000_000
"""The most jobs of one concurrency key a ``key_limit`` lets run at once."""

MAX_KEY_WEIGHT = 1000
"""The most turns a key may take to another's one (``key_weight``)."""

MAX_BATCH = 10_000
"""Rows one claim locks or one completion round trip writes: a statement, not a bulk load."""

MAX_PARENTS = 10_000
"""The most parents one job may wait for (``depends_on``, a chord's header, a group in a
chain): a fan-in of 9,999 fits."""

MAX_WORKFLOW_JOBS = 100_000
"""The most jobs one workflow enqueue may write (one transaction)."""

MAX_WORKFLOW_DEPTH = 10_000
"""The longest path of one workflow enqueue (a chain of 10,000 links fits)."""

MAX_TRACEBACK_CHARS = 8000
"""A traceback is cut to its last 8,000 characters, where the cause is."""

MAX_TEXT_BYTES = 1000
"""Task and queue names, unique, concurrency and ordering keys, correlation ids, schedule and
worker names: short labels, not documents, at most 1,000 bytes of UTF-8 each (``check_text``).

Bytes, not characters, because bytes are what an index holds: PostgreSQL refuses a btree entry
over 2,704 bytes (``index row size ... exceeds btree version 4 maximum``, failing the whole
statement, so the whole batch), and its widest entries hold two of these labels beside about
40 bytes (the keyed claim's walk: queue, concurrency key, priority, run_at, id; a unique key's:
the key and its task's name). 2 x 1,000 + 40 fits with room whatever the characters, where
1,000 characters of CJK text (3,000 bytes) did not. SQLite has no such limit; the same bound
holds there so both databases accept exactly the same jobs."""

MAX_TEXT_CHARS = 1000
"""Free text nothing indexes (a progress message, an audit entry's fields): characters."""

DEFAULT_MAX_SIGNALS_KEPT = 2000
"""The signals one job keeps that no ``wait_for`` took yet, of every name together
(``App(max_signals_kept=)``): past it, ``app.signal`` raises MailboxFull, so a flood of
signals to one job cannot grow its mailbox without bound. Far more than people or a
workflow send one job between two of its waits."""

JOB_AUDIT_KEPT = 20
"""The person actions a job's own ``audit`` list keeps, the last ones, after one entry that
counts those left out (``{"at": ..., "who": "skiplock", "what": "37 earlier actions left out",
"omitted": 37}``, first); ``skiplock_audit`` keeps every one. The bounded append is one SQL
expression, written out (this number in it) in every statement that records a person's
action: ``_backends/postgres/queries/inspect.sql`` and ``workflow.sql``,
``_backends/sqlite/queries/jobs.sql`` and ``workflow.sql``. Why: a row rewritten whole at
each action grew without bound (4,000 signals to one job made a 360 kB list and 81 MB of
WAL); now an append costs the same at the 10th action and the 10,000th."""

EARLIEST_RUN_AT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_RUN_AT = datetime(9000, 1, 1, tzinfo=UTC)
"""``run_after`` datetimes outside these are refused: ``datetime.max`` breaks every read."""


def _fail(option: str, value: object, rule: str) -> ConfigurationError:
    return ConfigurationError(f"{option}={value!r}: {rule}")


def check_seconds(
    option: str, value: object, *, minimum: float = 0.0, open_: bool = False
) -> float:
    """A finite number of seconds in ``[minimum, MAX_SECONDS]`` (``(minimum, …]`` if open_)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(option, value, "must be a number of seconds")
    low = f"> {minimum:g}" if open_ else f">= {minimum:g}"
    if not math.isfinite(value) or value > MAX_SECONDS:
        raise _fail(option, value, f"must be finite, {low} and <= {MAX_SECONDS:g} s (10 years)")
    if value < minimum or (open_ and value == minimum):
        raise _fail(option, value, f"must be {low} seconds")
    return float(value)


def check_int(option: str, value: object, minimum: int, maximum: int = MAX_INT) -> int:
    """An int (not a bool) within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(option, value, "must be an int")
    if not minimum <= value <= maximum:
        raise _fail(option, value, f"must be between {minimum} and {maximum}")
    return value


def check_text(option: str, value: object, *, optional: bool = False) -> None:
    """A non-empty string without NUL (PostgreSQL ``text`` refuses it) that UTF-8 can encode
    (a lone surrogate cannot: both drivers fail it), at most MAX_TEXT_BYTES bytes of it."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        raise _fail(option, value, "must be a non-empty string")
    if "\x00" in value:
        raise _fail(option, value, "must not contain a NUL character")
    size = text_bytes(option, value)
    if size > MAX_TEXT_BYTES:
        raise ConfigurationError(oversized(option, value, size))


def text_bytes(option: str, value: str) -> int:
    """How many bytes ``value`` takes in UTF-8; ConfigurationError if it cannot be encoded."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise _fail(
            option, value[:40], f"is not valid text: {exc.reason} at character {exc.start}"
        ) from None


def oversized(option: str, value: str, size: int) -> str:
    """The message for a label over MAX_TEXT_BYTES: the option, its start and its size."""
    return (
        f"{option}={value[:40]!r}... is {size} bytes of UTF-8 ({len(value)} characters): "
        f"must be at most {MAX_TEXT_BYTES} bytes"
    )


def check_run_after(value: object) -> None:
    """None, a delay within MAX_SECONDS, or an aware datetime before LATEST_RUN_AT."""
    if value is None:
        return
    if isinstance(value, timedelta):  # a delay in the past means "now", as a past datetime does
        check_seconds("run_after", value.total_seconds(), minimum=-MAX_SECONDS)
        return
    if not isinstance(value, datetime):
        raise _fail("run_after", value, "must be a datetime, a timedelta or None")
    if value.tzinfo is None:
        raise _fail("run_after", value, "give a timezone-aware datetime (e.g. UTC)")
    try:
        inside = value.utcoffset() is not None and EARLIEST_RUN_AT <= value < LATEST_RUN_AT
    except OverflowError:  # datetime.max/min in a zone: converting to UTC overflows
        inside = False
    if not inside:
        raise _fail(
            "run_after", value, f"must be between {EARLIEST_RUN_AT.year} and {LATEST_RUN_AT.year}"
        )


MAX_RATE_PER_S = 1_000_000.0
"""The highest ``rate_per_s`` a queue limit takes (starts a second, across every worker)."""


MIN_AGING_S = 0.001
MAX_AGING_S = 30 * 86400.0
"""A queue's ``aging_s`` lies in ``[MIN_AGING_S, MAX_AGING_S]``: 1 ms to 30 days. Past a month a
step of aging is no aging a person would notice; under a millisecond the claim is FIFO in all
but name, and the floor keeps every effective priority (``priority + wait // aging_s``) an
exact integer in a double (< 2**53) whatever the wait, on both backends."""


def check_aging(option: str, value: object) -> float:
    """A finite number of seconds in ``[MIN_AGING_S, MAX_AGING_S]``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(option, value, "must be a number of seconds")
    if not (math.isfinite(value) and MIN_AGING_S <= value <= MAX_AGING_S):
        raise _fail(
            option, value, f"must be finite, >= {MIN_AGING_S:g} and <= {MAX_AGING_S:g} s (30 days)"
        )
    return float(value)


def check_rate(option: str, value: object) -> float:
    """A finite rate in ``(0, MAX_RATE_PER_S]``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(option, value, "must be a number per second")
    if not (math.isfinite(value) and 0 < value <= MAX_RATE_PER_S):
        raise _fail(option, value, f"must be finite, > 0 and <= {MAX_RATE_PER_S:g}")
    return float(value)
