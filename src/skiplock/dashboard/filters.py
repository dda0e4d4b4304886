"""A person's filters, read from the query string and checked at the edge.

A bad value is a ``BadFilter`` naming the field and what it should be; the page shows that
one line above an empty list (status 400), never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from .._job import JobFilter, JobState

PAGE_SIZE = 50
MAX_SELECTED = 500
"""At most this many jobs ticked for one bulk action (ten pages)."""
MAX_TEXT = 4000
"""Longer than any error message a job keeps (2,000 characters), so a dead-letter group's
message always fits in a filter."""
MAX_ID = 2**63 - 1


class BadFilter(ValueError):
    """A filter value a person typed that cannot be used, with what to type instead."""


@dataclass(frozen=True, slots=True)
class JobQuery:
    """The Jobs page's filters as typed (to fill the form again) and as a JobFilter."""

    state: JobState | None
    queue: str
    task: str
    error: str
    since: str
    until: str
    before: int | None
    find: str = ""
    """A search: a job id, a unique key or a correlation id, exactly (the filters aside)."""
    last_error: str | None = None
    """A dead-letter group's exact last error (None: any; "": the jobs without one), so the
    group's link lists its jobs and no other ("boom 1" is not "boom 10")."""

    def job_filter(self, limit: int = PAGE_SIZE) -> JobFilter:
        return JobFilter(
            task=self.task or None,
            queue=self.queue or None,
            error=self.error or None,
            last_error=self.last_error,
            since=_time("since", self.since),
            until=_time("until", self.until),
            limit=limit,
        )

    def link(self, **changes: Any) -> str:
        """This query's string with some fields changed (``before=None`` drops paging)."""
        fields = {
            "state": self.state.value if self.state else "",
            "queue": self.queue,
            "task": self.task,
            "error": self.error,
            "since": self.since,
            "until": self.until,
            "before": self.before or "",
            "find": self.find,
        } | changes
        last_error = fields.pop("last_error", self.last_error)
        kept = {k: v for k, v in fields.items() if v not in ("", None)}
        if last_error is not None:  # kept even when empty: the group without an error
            kept["last_error"] = last_error
        return urlencode(kept)


def job_query(params: Any) -> JobQuery:
    """Read the Jobs page's query string (a Starlette QueryParams or a dict)."""
    state_text = _text(params, "state")
    try:
        state = JobState(state_text) if state_text else None
    except ValueError:
        states = ", ".join(s.value for s in JobState)
        raise BadFilter(f"state {state_text!r}: must be one of {states}") from None
    query = JobQuery(
        state=state,
        queue=_text(params, "queue"),
        task=_text(params, "task"),
        error=_text(params, "error"),
        since=_text(params, "since"),
        until=_text(params, "until"),
        before=_id(params, "before"),
        find=_text(params, "find"),
        last_error=exact_text_field(params, "last_error") if "last_error" in params else None,
    )
    query.job_filter()  # a bad time fails here, at the edge
    return query


def after_id(params: Any) -> int | None:
    """A list's ``after``: the last id of the page before (None: the first page)."""
    return _id(params, "after")


def text_field(params: Any, name: str) -> str:
    """A text field of a query string or form: at most MAX_TEXT characters, no NUL."""
    return _text(params, name)


def exact_text_field(params: Any, name: str) -> str:
    """A text field kept exactly as sent (a dead-letter group's error is its key: trimming
    it would name another group), at most MAX_TEXT characters, no NUL."""
    return _text(params, name, strip=False)


def _text(params: Any, name: str, strip: bool = True) -> str:
    value = str(params.get(name) or "")
    value = value.strip() if strip else value
    if len(value) > MAX_TEXT or "\x00" in value:
        raise BadFilter(f"{name}: at most {MAX_TEXT} characters, without NUL")
    return value


def _id(params: Any, name: str) -> int | None:
    text = _text(params, name)
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) <= MAX_ID:
        raise BadFilter(f"{name} {text!r}: must be a job id (a positive whole number)")
    return int(text)


def selected_ids(values: list[str]) -> tuple[int, ...]:
    """The job ids ticked for a bulk action, each checked, in the order given, once each."""
    if not values:
        raise BadFilter("select at least one job (tick its box) first")
    if len(values) > MAX_SELECTED:
        raise BadFilter(f"ids: at most {MAX_SELECTED} jobs at once, got {len(values)}")
    ids = tuple(dict.fromkeys(i for v in values if (i := _id({"ids": v}, "ids")) is not None))
    if not ids:
        raise BadFilter("select at least one job (tick its box) first")
    return ids


def job_id(text: str) -> int:
    """A job id from a URL path."""
    return _id({"job": text}, "job") or 0


def _time(name: str, text: str) -> datetime | None:
    """An ISO 8601 date or time; one without a zone is UTC."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise BadFilter(
            f"{name} {text!r}: must be a date or time like 2026-11-30 or 2026-11-30T14:00 (UTC)"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)
