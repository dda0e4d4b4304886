"""Cron parsing and next-fire times: validation messages, golden DST tables, properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplock import ConfigurationError
from skiplock._cron import CronExpression, zone


def fires(expr: str, tz: str, after: str, n: int) -> list[str]:
    start = datetime.fromisoformat(after)
    out = []
    for instant in CronExpression(expr).next_fires(start, zone(tz)):
        out.append(instant.strftime("%Y-%m-%dT%H:%M:%SZ"))
        if len(out) == n:
            return out
    return out


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("61 * * * *", "minute field '61' out of range 0-59"),
        ("0 24 * * *", "hour field '24' out of range 0-23"),
        ("0 0 0 * *", "day-of-month field '0' out of range 1-31"),
        ("0 0 1 13 *", "month field '13' out of range 1-12"),
        ("0 0 * * 8", "day-of-week field '8' out of range 0-7"),
        ("0 0 * * * 60", "second field '60' out of range 0-59"),
        ("5-2 * * * *", "minute field '5-2': range runs backwards"),
        ("*/0 * * * *", "minute field '*/0': step must be a whole number >= 1"),
        ("x * * * *", "minute field 'x' is not a number"),
        ("0 0 * foo *", "month field 'foo' is not a number"),
        ("\u00b2 * * * *", "minute field '\u00b2' is not a number"),  # a digit to isdigit
        ("*/\u00b2 * * * *", "minute field '*/\u00b2': step must be"),
        ("* * *", "expected 5 fields"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
    ],
)
def test_invalid_expressions_name_the_bad_field(expr: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("*", r"\*")):
        CronExpression(expr)


def test_bad_zone_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="Mars/Olympus"):
        zone("Mars/Olympus")


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("@hourly", "2024-01-01T10:30:00+00:00", ["2024-01-01T11:00:00Z", "2024-01-01T12:00:00Z"]),
        ("@daily", "2024-01-01T10:30:00+00:00", ["2024-01-02T00:00:00Z"]),
        ("@weekly", "2024-01-01T10:30:00+00:00", ["2024-01-07T00:00:00Z"]),
        ("@monthly", "2024-01-31T10:30:00+00:00", ["2024-02-01T00:00:00Z"]),
        ("@yearly", "2024-06-01T00:00:00+00:00", ["2025-01-01T00:00:00Z"]),
        # sixth field: seconds
        (
            "* * * * * */20",
            "2024-01-01T00:00:05+00:00",
            ["2024-01-01T00:00:20Z", "2024-01-01T00:00:40Z", "2024-01-01T00:01:00Z"],
        ),
        # names, ranges, lists
        (
            "0 9 * jan-mar mon-fri",
            "2024-03-29T10:00:00+00:00",
            ["2025-01-01T09:00:00Z", "2025-01-02T09:00:00Z", "2025-01-03T09:00:00Z"],
        ),
        (
            "15,45 8-9 * * *",
            "2024-01-01T08:20:00+00:00",
            ["2024-01-01T08:45:00Z", "2024-01-01T09:15:00Z", "2024-01-01T09:45:00Z"],
        ),
        # leap days, month ends, year ends
        (
            "0 0 29 2 *",
            "2024-03-01T00:00:00+00:00",
            ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"],
        ),
        (
            "0 12 31 * *",
            "2024-01-31T13:00:00+00:00",
            ["2024-03-31T12:00:00Z", "2024-05-31T12:00:00Z", "2024-07-31T12:00:00Z"],
        ),
        (
            "59 23 31 12 *",
            "2024-06-01T00:00:00+00:00",
            ["2024-12-31T23:59:00Z", "2025-12-31T23:59:00Z"],
        ),
    ],
)
def test_syntax_golden_utc(expr: str, after: str, expected: list[str]) -> None:
    assert fires(expr, "UTC", after, len(expected)) == expected


# Europe/Paris 2024: spring forward 31 Mar 02:00 CET -> 03:00 CEST (01:00Z);
#                    fall back     27 Oct 03:00 CEST -> 02:00 CET  (01:00Z).
# America/New_York 2024: 10 Mar 02:00 EST -> 03:00 EDT (07:00Z); 3 Nov 02:00 EDT -> 01:00 EST.
# Australia/Lord_Howe 2024: 7 Apr 02:00 +11 -> 01:30 +10:30 (6 Apr 15:00Z);
#                           6 Oct 02:00 +10:30 -> 02:30 +11 (5 Oct 15:30Z).
DST_GOLDEN = [
    # wall-clock slot in the gap fires once, at the first instant after the gap
    (
        "30 2 * * *",
        "Europe/Paris",
        "2024-03-30T12:00:00+00:00",
        ["2024-03-31T01:00:00Z", "2024-04-01T00:30:00Z"],
    ),
    # wall-clock slot in the overlap fires once, at its first occurrence
    (
        "30 2 * * *",
        "Europe/Paris",
        "2024-10-26T12:00:00+00:00",
        ["2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"],
    ),
    # several wall-clock slots in one gap collapse onto the same instant: fired once
    (
        "0,20,40 2 * * *",
        "Europe/Paris",
        "2024-03-30T23:00:00+00:00",
        ["2024-03-31T01:00:00Z", "2024-04-01T00:00:00Z"],
    ),
    # absolute-time schedules follow elapsed time: no hole, no double
    (
        "*/30 * * * *",
        "Europe/Paris",
        "2024-03-31T00:00:00+00:00",
        ["2024-03-31T00:30:00Z", "2024-03-31T01:00:00Z", "2024-03-31T01:30:00Z"],
    ),
    (
        "*/30 * * * *",
        "Europe/Paris",
        "2024-10-27T00:00:00+00:00",
        [
            "2024-10-27T00:30:00Z",
            "2024-10-27T01:00:00Z",
            "2024-10-27T01:30:00Z",
            "2024-10-27T02:00:00Z",
        ],
    ),
    (
        "0 * * * *",
        "Europe/Paris",
        "2024-10-26T23:30:00+00:00",
        ["2024-10-27T00:00:00Z", "2024-10-27T01:00:00Z", "2024-10-27T02:00:00Z"],
    ),
    # New York
    (
        "30 2 * * *",
        "America/New_York",
        "2024-03-09T12:00:00+00:00",
        ["2024-03-10T07:00:00Z", "2024-03-11T06:30:00Z"],
    ),
    (
        "30 1 * * *",
        "America/New_York",
        "2024-11-02T12:00:00+00:00",
        ["2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"],
    ),
    (
        "0 9 * * *",
        "America/New_York",
        "2024-03-09T00:00:00+00:00",
        ["2024-03-09T14:00:00Z", "2024-03-10T13:00:00Z"],
    ),
    (
        "*/20 * * * *",
        "America/New_York",
        "2024-11-03T05:30:00+00:00",
        [
            "2024-11-03T05:40:00Z",
            "2024-11-03T06:00:00Z",
            "2024-11-03T06:20:00Z",
            "2024-11-03T06:40:00Z",
            "2024-11-03T07:00:00Z",
        ],
    ),
    # Lord Howe: a 30-minute shift
    (
        "30 1 * * *",
        "Australia/Lord_Howe",
        "2024-04-06T00:00:00+00:00",
        ["2024-04-06T14:30:00Z", "2024-04-07T15:00:00Z"],
    ),
    (
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2024-10-05T00:00:00+00:00",
        ["2024-10-05T15:30:00Z", "2024-10-06T15:15:00Z"],
    ),
    (
        "*/15 * * * *",
        "Australia/Lord_Howe",
        "2024-04-06T14:40:00+00:00",
        [
            "2024-04-06T14:45:00Z",
            "2024-04-06T15:00:00Z",
            "2024-04-06T15:15:00Z",
            "2024-04-06T15:30:00Z",
        ],
    ),
    (
        "0 * * * *",
        "Australia/Lord_Howe",
        "2024-04-06T13:30:00+00:00",
        ["2024-04-06T14:00:00Z", "2024-04-06T15:30:00Z", "2024-04-06T16:30:00Z"],
    ),
    (
        "*/30 * * * *",
        "Australia/Lord_Howe",
        "2024-10-05T14:50:00+00:00",
        ["2024-10-05T15:00:00Z", "2024-10-05T15:30:00Z", "2024-10-05T16:00:00Z"],
    ),
]


@pytest.mark.parametrize(("expr", "tz", "after", "expected"), DST_GOLDEN)
def test_dst_golden(expr: str, tz: str, after: str, expected: list[str]) -> None:
    assert fires(expr, tz, after, len(expected)) == expected


EXPRESSIONS = [
    "*/15 * * * *",
    "30 2 * * *",
    "0 * * * *",
    "0,30 1-3 * * *",
    "*/7 */2 * * *",
    "45 23 * * 1-5",
    "0 0 1 * *",
    "0 2 * * sun",
    "* * * * * */30",
]
ZONES = ["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]


@settings(max_examples=150, deadline=None)
@given(
    expr=st.sampled_from(EXPRESSIONS),
    tz=st.sampled_from(ZONES),
    start=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1)),
)
def test_next_fires_increase_strictly_and_match(expr: str, tz: str, start: datetime) -> None:
    cron, zoneinfo = CronExpression(expr), zone(tz)
    after = start.replace(tzinfo=UTC)
    previous = after
    for n, instant in enumerate(cron.next_fires(after, zoneinfo)):
        assert instant > previous
        local = instant.astimezone(zoneinfo)
        wall = local.replace(tzinfo=None)
        if not cron.matches(wall):
            # only the wall-clock rule may fire off-pattern: at the end of a gap
            before = (instant - timedelta(seconds=1)).astimezone(zoneinfo)
            assert not cron.absolute
            assert before.utcoffset() != local.utcoffset()
        previous = instant
        if n == 30:
            break
